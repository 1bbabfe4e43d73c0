"""``interactive_tuning``: a conversation with a person takes the interactive settings.

A history holds a reply once a user message follows an assistant message that
made no tool call (``holds_reply``); a message the application marks as its own
(``app_message``) is none. From then on the fields the policy leaves unset take
``INTERACTIVE``, in the reference and in ``prepare`` alike (on by default); the
switch waits for the next pruning, so the previous prompt is re-sent while it
fits.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    InvalidInputError,
    TiktokenCounter,
    app_message,
    is_app_message,
    is_pinned,
    pin,
    unpin,
)
from langchain_context_guard.engine import reference_prepare
from langchain_context_guard.engine._interactive import (
    INTERACTIVE,
    INTERACTIVE_ARCHIVED,
)
from langchain_context_guard.engine._messages import holds_reply
from langchain_context_guard.engine.incremental._handover import policy_fingerprint
from langchain_context_guard.engine.tokens._anchor import full_scan
from tests.engine._support import (
    agent_history,
    ai,
    call,
    chat_history,
    fresh_like,
    lines,
    result,
    snapshot,
    transcripts,
)
from tests.engine.test_reference import assert_reference

COUNTER = TiktokenCounter()
TUNED = GuardPolicy(context_window=16_000, interactive_tuning=True)
UNTUNED = GuardPolicy(context_window=16_000, interactive_tuning=False)


def _count(message: BaseMessage) -> int:
    return COUNTER.count_message(message)


def _chat(turns: int) -> list[BaseMessage]:
    """A coding task, then a person's replies, each starting a tool loop."""
    history = agent_history(12, result_chars=4_000)
    for t in range(turns):
        history.append(AIMessage(f"Done with part {t}. Which option next?", id=f"d{t}"))
        note = lines(80, prefix=f"log {t}")  # what the person pastes in
        history.append(HumanMessage(f"option {t + 1} is closest\n{note}", id=f"h{t}"))
        for k in range(6):
            cid = f"p{t}-{k}"
            history.append(ai(call(cid, cmd=f"grep -n x{k} m{t}.py"), id=f"q{cid}"))
            history.append(result(cid, lines(400, prefix=cid), id=f"r{cid}"))
    return history


def test_a_reply_is_a_user_message_after_an_answer():
    task = HumanMessage("Fix the bug.")
    answer = AIMessage("Fixed: the parser skipped blank lines.")
    assert not holds_reply([task])
    assert not holds_reply([task, answer])
    assert holds_reply([task, answer, HumanMessage("thanks, now the docs")])
    # After a tool call's result, or an assistant message still calling, no reply.
    calling = ai(call("c1"))
    assert not holds_reply([task, calling, result("c1"), HumanMessage("go on")])
    assert not holds_reply([task, calling, HumanMessage("go on")])
    # The guard's own notes are no reply.
    note = HumanMessage(
        "[earlier turns]",
        additional_kwargs={"context_guard": {"kind": "digest"}},
    )
    assert not holds_reply([task, answer, note])
    # From ``start`` on, the pair across it included.
    history = [task, answer, HumanMessage("and the tests?")]
    assert holds_reply(history, 2)
    assert not holds_reply(history, 3)


def test_a_message_the_application_marks_as_its_own_is_no_reply():
    task, answer = HumanMessage("Fix the bug."), AIMessage("Two commands at once.")
    nudge = app_message(HumanMessage("Please send exactly one command."))
    assert is_app_message(nudge) and app_message(nudge) is nudge
    assert not holds_reply([task, answer, nudge])
    # Pinned, it stays the application's; a pinned reply is still a reply.
    assert is_pinned(pin(nudge)) and is_app_message(pin(nudge))
    assert is_app_message(unpin(pin(nudge))) and not is_pinned(unpin(pin(nudge)))
    assert not holds_reply([task, answer, pin(nudge)])
    assert holds_reply([task, answer, pin(HumanMessage("thanks, now the docs"))])
    # The guard's notes and other roles are refused, with the fix.
    with pytest.raises(InvalidInputError, match="marks user messages"):
        app_message(answer)  # type: ignore[arg-type]
    digest = HumanMessage(
        "[earlier]", additional_kwargs={"context_guard": {"kind": "digest"}}
    )
    with pytest.raises(InvalidInputError, match="'digest'"):
        app_message(digest)
    # The caller's message is not changed.
    plain = HumanMessage("go on")
    app_message(plain)
    assert plain.additional_kwargs == {}


def test_a_nudged_agent_runs_as_one_untuned():
    chat = _chat(4)  # each user message after an answer, marked as the app's
    nudged = [app_message(m) if m.id and m.id[0] == "h" else m for m in chat]

    def sent(policy: GuardPolicy, messages: list[BaseMessage]) -> str:
        guard = ContextGuard(policy, token_counter=COUNTER)
        return snapshot(guard.prepare(messages).messages)

    assert sent(TUNED, nudged) == sent(UNTUNED, nudged)
    assert sent(TUNED, chat) != sent(UNTUNED, chat)  # unmarked: replies


@settings(max_examples=60, deadline=None)
@given(transcripts(), st.data())
def test_a_grown_scan_finds_a_reply_as_a_whole_scan_does(history, data):
    cut = data.draw(st.integers(0, len(history)))
    head = full_scan(history[:cut], _count)
    grown = head.replied or holds_reply(history, cut)
    assert grown == full_scan(history, _count).replied == holds_reply(history)


def test_the_policy_switches_only_the_fields_left_unset():
    guard = ContextGuard(TUNED)
    assert guard.policy_for(None).prune_to == GuardPolicy().prune_to
    tuned = guard.policy_for(None, replied=True)
    assert {f: getattr(tuned, f) for f in INTERACTIVE} == INTERACTIVE
    assert guard.policy_for(None, replied=True) is tuned  # resolved once
    own = ContextGuard(
        GuardPolicy(
            context_window=16_000,
            interactive_tuning=True,
            prune_to=0.8,
            digest=False,
        )
    ).policy_for(None, replied=True)
    assert (own.prune_to, own.digest, own.digest_form) == (0.8, False, "note")
    assert own.keep_recent_tool_results == INTERACTIVE["keep_recent_tool_results"]
    off = ContextGuard(UNTUNED)
    assert off.policy_for(None, replied=True) is off.policy_for(None)
    assert GuardPolicy().interactive_tuning  # on by default


def test_before_any_reply_the_output_is_the_untuned_guards():
    history = agent_history(40, result_chars=4_000)
    untuned = ContextGuard(UNTUNED, token_counter=COUNTER)
    tuned = ContextGuard(TUNED, token_counter=COUNTER)
    for n in range(2, len(history) + 1, 3):
        sent = tuned.prepare(history[:n])
        assert snapshot(sent.messages) == snapshot(
            untuned.prepare(history[:n]).messages
        )


def test_after_a_reply_the_guard_prunes_with_the_interactive_settings():
    history = _chat(4)
    out = ContextGuard(TUNED, token_counter=COUNTER).prepare(history)
    assert out.report.tokens_after <= out.report.budget
    same = GuardPolicy(context_window=16_000, **INTERACTIVE)
    expected = ContextGuard(same, token_counter=COUNTER).prepare(history)
    assert snapshot(out.messages) == snapshot(expected.messages)
    kinds = {e.kind for e in out.report.events}
    assert "digest" in kinds  # the trimmed turns, cut to their calls


def test_prepare_is_the_reference_across_the_switch():
    history = _chat(3)
    policy = TUNED.model_copy(update={"stable_prefix": False})
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in range(len(history) - 60, len(history) + 1):
        assert_reference(guard, history[:n])


def test_the_switch_waits_for_the_next_pruning():
    """The reply's call re-sends the previous prompt: the cache keeps hitting."""
    history = _chat(3)
    reply = next(i for i, m in enumerate(history) if m.id == "h0")
    guard = ContextGuard(TUNED, token_counter=COUNTER)
    before = guard.prepare(history[:reply]).messages
    after = guard.prepare(history[: reply + 1])
    assert snapshot(after.messages[: len(before)]) == snapshot(before)
    assert after.report.reused == len(before)
    # Once the history no longer fits, the pruning is the interactive one.
    digests = 0
    for n in range(reply + 2, len(history) + 1):
        events = guard.prepare(history[:n]).report.events
        digests += any(e.kind == "digest" for e in events)
    assert digests


@settings(max_examples=30, deadline=None)
@given(transcripts(usage=True, names=True), st.sampled_from([16_000, 20_000]))
def test_a_tuned_guard_is_the_reference_on_generated_histories(history, window):
    policy = GuardPolicy(
        context_window=window, interactive_tuning=True, stable_prefix=False
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in range(1, len(history) + 1):
        assert_reference(guard, history[:n])


def test_a_chat_history_switches_on_its_first_reply():
    history = chat_history(3)
    scan = [full_scan(history[:n], _count).replied for n in range(len(history) + 1)]
    first = scan.index(True)
    assert isinstance(history[first - 1], HumanMessage)
    assert isinstance(history[first - 2], AIMessage)
    assert not history[first - 2].tool_calls


def test_with_an_archive_a_reply_tunes_the_policy_by_the_archived_settings():
    window = GuardPolicy(context_window=16_000)
    tuned = ContextGuard(window.with_archive()).policy_for(None, replied=True)
    bare = ContextGuard(window).policy_for(None, replied=True)
    assert tuned.archived_results and tuned.digest_form == "turns"
    differ = {
        name
        for name in GuardPolicy.model_fields
        if getattr(tuned, name) != getattr(bare, name)
    }
    # the archive's own note and depth are gone; the archived settings instead
    assert differ == {
        "archived_results",
        "digest_share",
        "digest_max_tokens",
        "prune_to",
    }
    for name, value in INTERACTIVE_ARCHIVED.items():
        assert getattr(tuned, name) == value
    # archived results set by hand are tuned the same way
    by_hand = GuardPolicy(context_window=16_000, archived_results=True)
    by_hand_tuned = ContextGuard(by_hand).policy_for(None, replied=True)
    assert by_hand_tuned.model_dump() == tuned.model_dump()
    # before a reply, the archive's own settings
    assert ContextGuard(window.with_archive()).policy_for(None).digest_share == 0.01
    # what the application sets stays set, with or without an archive
    own = GuardPolicy(context_window=16_000, prune_to=0.8, digest_share=0.02)
    mine = ContextGuard(own.with_archive()).policy_for(None, replied=True)
    assert (mine.prune_to, mine.digest_share, mine.digest_form) == (0.8, 0.02, "turns")
    assert mine.digest_max_tokens == bare.digest_max_tokens  # set with the share
    assert mine.compress_min_chars == bare.compress_min_chars
    # and with interactive_tuning off, a reply changes nothing
    off = ContextGuard(GuardPolicy(interactive_tuning=False).with_archive())
    assert off.policy_for(None, replied=True) is off.policy_for(None)


def test_an_archived_policy_updated_keeps_what_the_archive_filled_in_as_such():
    archived = GuardPolicy(context_window=16_000).with_archive()
    more = archived.updated(keep_recent_tool_results=5)
    assert more.chosen_fields == archived.chosen_fields | {"keep_recent_tool_results"}
    tuned = ContextGuard(more).policy_for(None, replied=True)
    assert (tuned.prune_to, tuned.digest_form, tuned.keep_recent_tool_results) == (
        INTERACTIVE_ARCHIVED["prune_to"],
        "turns",
        5,
    )
    # a record of one is no record of a policy with the same values set by hand
    by_hand = GuardPolicy(
        **{k: getattr(archived, k) for k in archived.model_fields_set}
    )
    assert by_hand.chosen_fields == archived.model_fields_set != archived.chosen_fields
    counter = ContextGuard(archived).counter
    assert policy_fingerprint(by_hand, counter) != policy_fingerprint(archived, counter)
    plain = GuardPolicy(context_window=16_000)
    assert policy_fingerprint(plain.updated(), counter) == policy_fingerprint(
        plain, counter
    )


def _w(start: int, end: int) -> str:
    return " ".join(f"w{i}" for i in range(start, end))


def _step(
    sid: str,
    text: str,
    calls: dict[str, dict[str, str]],
    results: list[str],
    *,
    thinking: bool = True,
    usage: int | None = None,
) -> list[BaseMessage]:
    """An assistant message making ``calls`` (by id: a write's ``content``, or a
    bash call), its signed reasoning first, then their results."""
    content: list[str | dict[str, str]] = [{"type": "text", "text": text}]
    if thinking:
        signed = {
            "type": "thinking",
            "thinking": "pondering " * 30,
            "signature": "c2ln",
        }
        content.insert(0, signed)
    made = [
        call(cid, name="write" if args else "bash", cmd=cid, **args)
        for cid, args in calls.items()
    ]
    extra = {}
    if usage is not None:
        spent = {"input_tokens": usage, "output_tokens": 50, "total_tokens": usage + 50}
        extra = {"usage_metadata": spent}
    answers = [
        ToolMessage(body, tool_call_id=c["id"], name=c["name"], id=f"r{c['id']}")
        for c, body in zip(made, results, strict=True)
    ]
    return [ai(*made, content=content, id=sid, **extra), *answers]


def _replied_writer() -> list[BaseMessage]:
    """A person's task with an image, file writes, an answer, a reply, an answer.

    The last answer's usage rescales the count: the digest's room shrinks
    while the cut stays where it was (found by the property test above).
    """
    image = base64.b64encode(b"ABC" * 2_000).decode()
    url = f"data:image/png;base64,{image}"
    task = [
        {"type": "text", "text": _w(0, 321)},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    history: list[BaseMessage] = [
        HumanMessage(task, id="u0"),
        HumanMessage(_w(0, 123), id="u1"),
    ]
    history += _step(
        "a1-0",
        _w(0, 44),
        {"c1-0-0": {}, "c1-0-1": {}, "c1-0-2": {"content": _w(0, 5)}},
        [_w(0, 1), _w(7, 8), _w(14, 15)],
        usage=100,
    )
    history += _step(
        "a1-1",
        _w(21, 52),
        {"c1-1-0": {"content": _w(21, 921)}, "c1-1-1": {}},
        [_w(21, 22), _w(28, 29)],
        thinking=False,
        usage=574,
    )
    history += _step(
        "a1-2",
        _w(35, 73),
        {
            "c1-2-0": {"content": _w(35, 935)},
            "c1-2-1": {"content": _w(35, 935)},
            "c1-2-2": {},
        },
        [_w(35, 36), _w(42, 92), _w(49, 50)],
        usage=1_853,
    )
    history += _step(
        "a1-3",
        _w(56, 84),
        {
            "c1-3-0": {"content": _w(56, 956)},
            "c1-3-1": {"content": _w(56, 956)},
            "c1-3-2": {},
        },
        [_w(56, 57), _w(63, 64), _w(70, 71)],
    )
    history += [AIMessage(_w(77, 247), id="f1"), HumanMessage(_w(77, 145), id="u2")]
    history += _step(
        "a2-1",
        _w(77, 125),
        {"c2-1-0": {"content": _w(77, 82)}, "c2-1-1": {}},
        [_w(77, 78), _w(84, 884)],
        usage=100,
    )
    spent = {"input_tokens": 7_687, "output_tokens": 50, "total_tokens": 7_737}
    answer = AIMessage([{"type": "text", "text": "x"}], id="a2-2", usage_metadata=spent)
    return [*history, answer]


def test_a_digest_whose_room_shrank_is_built_again():
    policy = GuardPolicy(context_window=16_000, stable_prefix=False)
    guard = ContextGuard(policy, token_counter=COUNTER)
    history = _replied_writer()
    for n in range(1, len(history) + 1):
        assert_reference(guard, history[:n])


def _persisted(
    guard: ContextGuard, turns: list[list[BaseMessage]], *, persist: bool
) -> list[tuple[list[BaseMessage], bool]]:
    """Each call's output, and whether it wrote a digest (a tuned pruning).

    As a persist-mode hook runs it: the output is the stored history the next
    call's new messages join.
    """
    state: list[BaseMessage] = []
    outputs = []
    for new in turns:
        out = guard.prepare([*state, *new], persist=persist)
        state = out.messages
        outputs.append((state, any(e.kind == "digest" for e in out.report.events)))
    return outputs


def _reply_turns() -> list[list[BaseMessage]]:
    """A task run to an answer, a person's reply, then a long tool loop."""
    head = agent_history(4, result_chars=3_000)
    steps = [head[:4], *[head[k : k + 2] for k in range(4, len(head), 2)]]
    steps.append([AIMessage("Plan: A, B or C?", id="ans"), HumanMessage("B", id="re")])
    for k in range(50):
        cid = f"loop{k}"
        steps.append(
            [
                ai(call(cid, cmd=f"grep -n s{k} src/*.py"), id=f"q{cid}"),
                result(cid, lines(120, prefix=cid), id=f"r{cid}"),
            ]
        )
    return steps


def test_a_persisted_conversation_keeps_its_reply_and_its_settings():
    """The persist-mode output is the next call's history: it holds the reply."""
    turns = _reply_turns()
    reply = next(k for k, t in enumerate(turns) if t[-1].id == "re")
    kept = _persisted(ContextGuard(TUNED, token_counter=COUNTER), turns, persist=True)
    lost = _persisted(ContextGuard(TUNED, token_counter=COUNTER), turns, persist=False)
    assert all(holds_reply(out) for out, _ in kept[reply:])
    # Without persist, the cut-down history soon lost it, and the settings with
    # it: no pruning after that writes the turns digest.
    gone = next(k for k in range(reply, len(lost)) if not holds_reply(lost[k][0]))
    assert not any(holds_reply(out) or tuned for out, tuned in lost[gone + 1 :])
    assert sum(tuned for _, tuned in kept[gone + 1 :]) >= 3
    # Before the reply, persist changes nothing.
    assert [snapshot(out) for out, _ in kept[:reply]] == [
        snapshot(out) for out, _ in lost[:reply]
    ]


def test_keep_reply_holds_the_newest_reply_while_anything_else_can_go():
    older = [AIMessage("Done. More?", id="ans0"), HumanMessage("yes", id="re0")]
    history = [m for turn in _reply_turns() for m in turn]
    history[4:4] = older
    policy = GuardPolicy(context_window=16_000, keep_reply=True)
    sent = ContextGuard(policy, token_counter=COUNTER).prepare(history).messages
    ids = [m.id for m in sent]
    assert ids[ids.index("ans") + 1] == "re"  # the newest reply, after its answer
    assert "re0" not in ids  # an older one goes like the rest
    # Without it the latest user message is kept too, but not what it answers.
    plain = ContextGuard(policy.model_copy(update={"keep_reply": False}))
    ids = [m.id for m in plain.prepare(history).messages]
    assert "re" in ids and "ans" not in ids


def test_an_answer_too_large_to_keep_goes_on_the_last_try():
    history = [m for turn in _reply_turns() for m in turn]
    at = next(i for i, m in enumerate(history) if m.id == "ans")
    history[at] = AIMessage(lines(3_000, prefix="plan"), id="ans")
    held = GuardPolicy(context_window=16_000, keep_reply=True)
    sent = ContextGuard(held, token_counter=COUNTER).prepare(history).messages
    assert next(m.text for m in sent if m.id == "ans").count("\n") < 5  # cut down
    # Kept whole, it cannot fit: the last try lets it go, with no error.
    whole = held.model_copy(update={"compress_assistant_text": False})
    out = ContextGuard(whole, token_counter=COUNTER).prepare(history)
    assert out.report.tokens_after <= out.report.budget
    assert "ans" not in [m.id for m in out.messages]


@settings(max_examples=30, deadline=None)
@given(transcripts(usage=True, names=True), st.sampled_from([6_000, 16_000]), st.data())
def test_a_persisted_conversation_is_the_reference(history, window, data):
    """Each call's history is the last output and the new messages, in both.

    Small windows, so that most histories are pruned, many of them past a reply.
    """
    stable = data.draw(st.booleans())
    policy = GuardPolicy(
        context_window=window,
        stable_prefix=stable,
        hard_min_tokens=0,
        warn_below_tokens=0,
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(history)), min_size=1))))
    state: list[BaseMessage] = []
    for start, end in zip([0, *cuts], cuts, strict=False):
        given = [*state, *history[start:end]]
        try:
            reference = reference_prepare(fresh_like(guard), given, persist=True)
        except BudgetExceededError as error:  # what must stay does not fit
            with pytest.raises(BudgetExceededError) as raised:
                guard.prepare(given, persist=True)
            assert (raised.value.tokens, raised.value.budget) == (
                error.tokens,
                error.budget,
            )
            return
        state = guard.prepare(given, persist=True).messages
        if not stable:  # a stable prefix re-sends its last prompt while it fits
            assert snapshot(state) == snapshot(reference)
        if holds_reply(given) and holds_reply(reference):
            assert holds_reply(state)


@pytest.mark.parametrize("persist", ["yes", 1, None])
def test_persist_must_be_a_bool(persist):
    guard = ContextGuard(TUNED, token_counter=COUNTER)
    with pytest.raises(InvalidInputError, match=r"prepare\(persist=\.\.\.\)") as raised:
        guard.prepare(_chat(1), persist=persist)
    assert "persist=True" in raised.value.hint
