"""The turns digest: trimmed turns kept in the assistant's role, cut to their calls."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import ConfigError, ContextGuard, GuardPolicy
from langchain_context_guard.engine import result_ordinals
from langchain_context_guard.engine._messages import MARKER_KEY, marker
from langchain_context_guard.engine._tool_calls import GEMINI_SIGNATURES
from langchain_context_guard.engine.passes._digest import (
    DIGEST_ID,
    digest_trimmed,
    is_digest,
)
from langchain_context_guard.engine.passes._digest_turns import (
    TurnsForm,
    cleared_turns,
)
from langchain_context_guard.replay._metrics import GUARD_WRITTEN, pointers
from tests.engine._support import THINKING, ai, assert_paired, call, lines, result
from tests.engine._support import snapshot as image
from tests.providers._support import violations

TURNS = GuardPolicy(context_window=16_000, digest=True, digest_form="turns")
PAYLOAD = "\n".join(f"def handler_{i}(request):  # route {i}" for i in range(120))


def _session(steps: int) -> list[BaseMessage]:
    """An interactive agent: it writes files, runs commands, reads long outputs."""
    history: list[BaseMessage] = [HumanMessage("Build the service.", id="task")]
    for k in range(steps):
        write = call(f"w{k}", "Write", file_path=f"src/svc/mod_{k}.py", content=PAYLOAD)
        run = call(f"b{k}", "Bash", command=f"pytest tests/test_mod_{k}.py -q")
        words = f"Now module {k}.\n" + lines(20, "plan")
        history.append(ai(write, run, content=words, id=f"a{k}"))
        history.append(result(f"w{k}", f"wrote src/svc/mod_{k}.py", id=f"tw{k}"))
        history.append(result(f"b{k}", lines(60, f"case_{k}"), id=f"tb{k}"))
    return history


def _cleared(sent: list[BaseMessage]) -> list[ToolMessage]:
    return [
        m
        for m in sent
        if isinstance(m, ToolMessage) and (marker(m) or {}).get("kind") == "cleared"
    ]


def _trimmed_keys(history: list[BaseMessage], sent: list[BaseMessage]) -> set[str]:
    """The keys of the results in ``history`` that ``sent`` does not hold."""
    keys = result_ordinals(history)
    sent_ids = {m.id for m in sent}
    return {
        f"#{keys[m.tool_call_id]}"
        for m in history
        if isinstance(m, ToolMessage) and m.id not in sent_ids
    }


def test_trimmed_turns_stay_as_their_calls_with_one_line_results() -> None:
    history = _session(60)
    before = image(history)
    sent = ContextGuard(TURNS).prepare(history).messages
    assert image(history) == before  # the caller's messages are not touched
    cleared = _cleared(sent)
    assert cleared, "the trimmed turns are kept cut down"
    assert not any(is_digest(m) for m in sent)
    assert_paired(sent)
    by_id = {m.id: m for m in history}
    for message in sent:
        if isinstance(message, AIMessage) and message.id in by_id:
            original = by_id[message.id]
            assert isinstance(original, AIMessage)
            commands = [c["args"].get("command") for c in message.tool_calls]
            assert commands == [c["args"].get("command") for c in original.tool_calls]
    first = next(i for i, m in enumerate(sent) if m in cleared)
    turn, short = sent[first - 2], sent[first - 1]
    assert isinstance(turn, AIMessage) and turn.id is not None
    assert short == by_id[f"tw{turn.id[1:]}"]  # a short result stays whole
    assert turn.text.startswith(f"Now module {turn.id[1:]}.\n[... 20 lines omitted")
    content = turn.tool_calls[0]["args"]["content"]
    assert len(content) < len(PAYLOAD) and "lines omitted" in content
    assert cleared[0].text == (
        "[output cleared by context guard to fit the context window]"
    )
    assert sent[0].id == "task"


def test_the_turns_come_in_order_where_the_trimmed_turns_were() -> None:
    history = _session(60)
    sent = ContextGuard(TURNS).prepare(history).messages
    order = {m.id: i for i, m in enumerate(history)}
    places = [order[m.id] for m in sent]
    assert places == sorted(places)
    cleared = {m.id for m in _cleared(sent)}
    last_cleared = max(i for i, m in enumerate(sent) if m.id in cleared)
    whole = [m for m in sent[last_cleared + 1 :] if isinstance(m, ToolMessage)]
    assert whole and all(m.id not in cleared for m in whole)


def test_a_placeholder_names_the_key_its_archived_output_is_read_back_by() -> None:
    history = _session(60)
    policy = TURNS.model_copy(update={"archived_results": True})
    sent = ContextGuard(policy).prepare(history).messages
    keys = result_ordinals(history)
    cleared = _cleared(sent)
    assert cleared
    for message in cleared:
        key = f"#{keys[message.tool_call_id]}"
        assert f'read_tool_result("{key}")' in message.text


def test_with_an_archive_every_trimmed_result_keeps_a_way_back() -> None:
    history = _session(60)
    policy = TURNS.model_copy(update={"archived_results": True})
    out = ContextGuard(policy).prepare(history)
    sent = out.messages
    assert out.report.tokens_after <= out.report.budget
    assert_paired(sent)
    keys = result_ordinals(history)
    trimmed = _trimmed_keys(history, sent)
    cleared = _cleared(sent)
    assert cleared and trimmed, "some turns are cut down, older ones trimmed past them"
    notes = [m for m in sent if is_digest(m)]
    assert len(notes) == 1
    note = notes[0]
    assert isinstance(note, HumanMessage)
    assert sent.index(note) < sent.index(
        cleared[0]
    )  # before the turns, where they were
    assert "search_tool_results" in note.text
    named = pointers(sent)
    assert trimmed <= named  # the trimmed past the room too, through the note's keys
    assert {f"#{keys[m.tool_call_id]}" for m in cleared} <= named


@pytest.mark.parametrize("stable", [True, False])
def test_with_no_room_for_the_digest_the_keys_still_point_back(stable: bool) -> None:
    # What must stay (a long system prompt, the task, the newest turn) leaves
    # less than the digest's room: the pruning keeps the line of keys.
    system = SystemMessage(lines(900, "rule"), id="sys")
    history = [system, *_session(30)]
    policy = TURNS.model_copy(
        update={"archived_results": True, "digest_share": 0.4, "stable_prefix": stable}
    )
    out = ContextGuard(policy).prepare(history)
    sent = out.messages
    assert out.report.tokens_after <= out.report.budget
    assert not _cleared(sent), "no room for the turns"
    trimmed = _trimmed_keys(history, sent)
    assert trimmed
    assert trimmed <= pointers(sent)
    assert_paired(sent)


def test_the_note_of_keys_comes_only_when_a_trimmed_turn_did_not_fit() -> None:
    source: list[BaseMessage] = [HumanMessage("task", id="task")]
    for k in range(4):
        source += [
            ai(call(f"c{k}"), id=f"a{k}"),
            result(f"c{k}", "x" * 900, id=f"t{k}"),
        ]
    gone = list(range(1, 9))
    kept = [m for i, m in enumerate(source) if i not in gone]
    form = TurnsForm(min_chars=500, lines=(3, 2), name_source=result_ordinals(source))
    count = lambda m: 10  # noqa: E731
    roomy = digest_trimmed(
        kept, source, gone, max_tokens=1_000, count=count, turns=form
    )
    assert [m.id for m in roomy] == [
        "task",
        "a0",
        "t0",
        "a1",
        "t1",
        "a2",
        "t2",
        "a3",
        "t3",
    ]
    assert not any(is_digest(m) for m in roomy)
    tight = digest_trimmed(kept, source, gone, max_tokens=30, count=count, turns=form)
    assert [m.id for m in tight] == ["task", DIGEST_ID, "a3", "t3"]
    assert "oldest first: #1-#4" in tight[1].text  # every trimmed result's key
    bare = digest_trimmed(kept, source, gone, max_tokens=10, count=count, turns=form)
    assert [m.id for m in bare] == ["task", DIGEST_ID]  # the keys before any turn
    none = digest_trimmed(kept, source, gone, max_tokens=5, count=count, turns=form)
    assert none is kept


def test_the_turns_fit_the_budget_and_the_same_cut_gives_the_same_bytes() -> None:
    history = _session(60)
    first = ContextGuard(TURNS.model_copy(update={"stable_prefix": False}))
    out = first.prepare(history)
    assert out.report.tokens_after <= out.report.budget
    again = ContextGuard(TURNS.model_copy(update={"stable_prefix": False}))
    assert image(again.prepare(history).messages) == image(out.messages)


def test_a_growing_history_re_sends_its_turns_unchanged_between_prunings() -> None:
    history = _session(80)
    guard = ContextGuard(TURNS)
    previous = None
    reused = 0
    for n in range(100, len(history) + 1, 3):
        out = guard.prepare(history[:n])
        sent = out.messages
        assert out.report.tokens_after <= out.report.budget
        assert_paired(sent)
        if previous is not None and out.report.reused:
            keep = out.report.reused
            assert image(sent[:keep]) == image(previous[:keep])
            reused += 1
        previous = sent
    assert reused > 3


def test_signed_turns_and_answers_without_calls_are_left_out() -> None:
    signed = ai(call("s1"), content=[THINKING, {"type": "text", "text": "go"}], id="s")
    gemini = ai(call("g1"), id="g", additional_kwargs={GEMINI_SIGNATURES: {"g1": "x"}})
    plain = ai(call("p1", command="ls src"), id="p")
    dropped: list[BaseMessage] = [
        signed,
        result("s1", "out", id="ts"),
        gemini,
        result("g1", "out", id="tg"),
        AIMessage("An answer that made no call.", id="answer"),
        plain,
        result("p1", "out", id="tp"),
    ]
    form = TurnsForm(min_chars=500, lines=(3, 2))
    made = cleared_turns(dropped, form, max_tokens=1_000, count=lambda m: 10)
    assert [(j, m.id) for j, m in made] == [(5, "p"), (6, "tp")]


def test_the_newest_turns_that_fit_are_kept() -> None:
    dropped: list[BaseMessage] = []
    for k in range(5):
        dropped += [ai(call(f"c{k}"), id=f"a{k}"), result(f"c{k}", "x", id=f"t{k}")]
    form = TurnsForm(min_chars=500, lines=(3, 2))
    made = cleared_turns(dropped, form, max_tokens=40, count=lambda m: 10)
    assert [m.id for _, m in made] == ["a3", "t3", "a4", "t4"]


def test_a_short_plain_result_is_sent_whole() -> None:
    image_block = {"type": "image", "url": "https://example.com/a.png"}
    compressed = {MARKER_KEY: {"kind": "compressed"}}  # short, but cut before
    cut = result(
        "c3", "head [... 40 lines omitted]", id="t3", additional_kwargs=compressed
    )
    dropped: list[BaseMessage] = [
        ai(call("c1"), call("c2"), call("c3"), call("c4"), id="a1"),
        result("c1", "exit 0: 3 passed", id="t1"),
        result("c2", lines(40), id="t2"),
        cut,
        result("c4", [{"type": "text", "text": "a chart"}, image_block], id="t4"),
    ]
    places = {"c1": 1, "c2": 2, "c3": 3, "c4": 4}
    archived = TurnsForm(min_chars=500, lines=(3, 2), name_source=places)
    made = dict(cleared_turns(dropped, archived, max_tokens=1_000, count=_tokens))
    assert made[1] is dropped[1]  # whole: its placeholder would save little
    assert [made[j].text for j in (2, 3, 4)] == [
        f"[output cleared by context guard to fit the context window; "
        f'full text: read_tool_result("#{k}")]'
        for k in (2, 3, 4)
    ]
    plain = TurnsForm(min_chars=500, lines=(3, 2))  # no archive: no keys named
    made = dict(cleared_turns(dropped, plain, max_tokens=1_000, count=_tokens))
    assert made[1] is dropped[1]
    assert [made[j].text for j in (2, 3, 4)] == [
        "[output cleared by context guard to fit the context window]"
    ] * 3


def _tokens(message: BaseMessage) -> int:
    """A counter: a token for every four characters."""
    return len(str(message.content)) // 4 + 1


def test_placeholders_are_the_library_s_own_text_to_the_replay() -> None:
    assert "cleared" in GUARD_WRITTEN


@pytest.mark.parametrize("archived", [False, True])
def test_a_provider_takes_the_turns_on_every_call(archived: bool) -> None:
    history = _session(40)
    share = 0.03 if archived else TURNS.digest_share  # a turn past the room: a note
    policy = TURNS.model_copy(
        update={"archived_results": archived, "digest_share": share}
    )
    guard = ContextGuard(policy)
    checked = noted = 0
    for n in range(60, len(history) + 1, 7):
        sent = guard.prepare(history[:n]).messages
        if _cleared(sent):
            checked += 1
            noted += any(is_digest(m) for m in sent)
            assert violations(sent) == {}
    assert checked >= 3
    assert bool(noted) == archived


def test_the_turns_form_needs_the_digest_on() -> None:
    with pytest.raises(ConfigError) as err:
        GuardPolicy(digest_form="turns")
    assert err.value.field == "digest_form"
    assert "digest=True" in (err.value.hint or "")
    with pytest.raises(ConfigError) as bad:
        GuardPolicy(digest=True, digest_form="calls")  # type: ignore[arg-type]
    assert bad.value.field == "digest_form"


def test_a_turn_takes_the_results_that_answer_it_and_no_other() -> None:
    dropped: list[BaseMessage] = [
        ai(call("c1"), id="a1"),
        result("c1", "first", id="t1"),
        ai(call("c1"), id="a2"),  # an id used again by a later turn
        result("c1", "second", id="t2"),
        ai(call("c2"), call("c3"), id="a3"),
        result("c2", "only one of two", id="t3"),
    ]
    form = TurnsForm(min_chars=500, lines=(3, 2))
    made = cleared_turns(dropped, form, max_tokens=1_000, count=lambda m: 10)
    assert [(j, m.id) for j, m in made] == [(0, "a1"), (1, "t1"), (2, "a2"), (3, "t2")]
