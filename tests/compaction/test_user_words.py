"""``keep_user_tokens``: the user's own messages kept verbatim through summaries."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_guard.compaction import Compactor
from langchain_context_guard.engine._messages import is_summary, is_user
from tests.compaction._support import (
    ScriptedSummarizer,
    chat_history,
    make_guard,
    settings,
    step,
)
from tests.fakes import pairing_errors
from tests.providers._support import violations

GUARD = make_guard()


def _history() -> list[BaseMessage]:
    """Five user turns of tool steps, one user note in the middle of a turn."""
    history = chat_history(turns=5, steps_per_turn=3)
    at = next(i for i, m in enumerate(history) if m.id == "user-2") + 3
    note = HumanMessage("Also keep the log format unchanged.", id="note")
    return [*history[:at], note, *history[at:]]


def _compact(**overrides: object) -> tuple[list[BaseMessage], Compactor, list[str]]:
    """Compact ``_history()``; also the ids of the user messages it summarised."""
    comp = Compactor(ScriptedSummarizer(), settings(**overrides), guard=GUARD)
    history = _history()
    plan = comp.plan(history)
    assert plan is not None
    summarised = [m.id or "" for m in plan.history + plan.turn_prefix if is_user(m)]
    return comp.compact(history).messages, comp, summarised


def test_every_user_request_of_the_summarised_range_is_kept_verbatim() -> None:
    history = _history()
    out, _, summarised = _compact(keep_user_tokens=10_000)
    assert len(summarised) >= 3  # the range holds several requests and the note
    by_id = {m.id: m for m in history}
    kept = [m for m in out if m.id in summarised]
    original = summarised[0]  # the first request: quoted whole by the summary
    assert original not in [m.id for m in kept]
    assert str(by_id[original].content) in str(out[1].content)
    assert [m.id for m in kept] == summarised[1:]  # every other one, in order
    assert all(m == by_id[m.id] for m in kept)  # as they were
    # Right after the summary, before the kept tail: never inside a call's unit.
    assert is_summary(out[1]) and out[2 : 2 + len(kept)] == kept
    assert pairing_errors(out) == []
    assert violations(history) == {} and violations(out) == {}


def test_off_by_default_the_summary_alone_carries_them() -> None:
    out, _, summarised = _compact()
    assert not {m.id for m in out} & set(summarised)


def test_kept_words_are_counted_in_the_history_after() -> None:
    plain, comp, _ = _compact()
    kept_out, kept_comp, summarised = _compact(keep_user_tokens=10_000)
    words = [m for m in kept_out if m.id in summarised]
    assert words
    after = kept_comp.tokens(kept_out)
    assert after > comp.tokens(plain)  # the same summary and tail, plus the words
    mark = kept_out[1].additional_kwargs["context_guard"]
    assert mark["tokens_after"] == after  # the figure the next trigger starts from
    assert mark["sent_after"] == kept_comp.sent_tokens(kept_out)


def test_over_the_cap_the_newest_are_kept_first() -> None:
    _, _, summarised = _compact(keep_user_tokens=10_000)
    by_id = {m.id: m for m in _history()}
    newest, second = by_id[summarised[-1]], by_id[summarised[-2]]
    count = GUARD.counter.count_message
    cap = count(newest) + count(second) - 1  # room for the newest only
    out, _, _ = _compact(keep_user_tokens=cap)
    kept = [m for m in out if m.id in summarised]
    assert kept == [newest]
    assert sum(count(m) for m in kept) <= cap


def test_the_next_summary_keeps_them_again_under_the_same_cap() -> None:
    comp = Compactor(
        ScriptedSummarizer(), settings(keep_user_tokens=10_000), guard=GUARD
    )
    first = comp.compact(_history()).messages
    words = [m.id for m in first[2:] if is_user(m)]
    later = [*first, HumanMessage("Now the docs.", id="user-9"), *step(1_000)]
    later += [*step(1_001), *step(1_002), *step(1_003)]
    second = comp.compact(later).messages
    kept = [m.id for m in second if is_user(m)]
    assert kept[: len(words)] == words and "user-9" in kept
    assert pairing_errors(second) == []
