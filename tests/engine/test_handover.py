"""export_state / restore_state: another guard sends the prompt this one would."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import ContextGuard, GuardPolicy

POLICY = GuardPolicy(
    context_window=20_000,
    reserve_tokens=3_000,
    warn_below_tokens=16_000,
    max_tool_result_share=0.5,  # big results prune, rather than being cut
)


def _history(steps: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [
        SystemMessage("You are terse.", id="sys"),
        HumanMessage("Go.", id="u"),
    ]
    for k in range(steps):
        call = {"name": "read", "args": {"k": k}, "id": f"c{k}"}
        usage: Any = {
            "input_tokens": 500 * k + 40,
            "output_tokens": 5,
            "total_tokens": 0,
        }
        history.append(
            AIMessage("", tool_calls=[call], id=f"a{k}", usage_metadata=usage)
        )
        text = f"{k}: line\n" * (900 + 97 * k % 700)
        history.append(ToolMessage(text, tool_call_id=f"c{k}", id=f"t{k}"))
    return history


def _small_step(history: list[BaseMessage]) -> list[BaseMessage]:
    call = {"name": "read", "args": {}, "id": "x"}
    return [
        *history,
        AIMessage("", tool_calls=[call], id="ax"),
        ToolMessage("done", tool_call_id="x", id="tx"),
    ]


def _serve(guard: ContextGuard, history: list[BaseMessage]) -> dict[int, Any]:
    """Every step of ``history`` through ``guard``; the records by reply index."""
    records: dict[int, Any] = {}
    for n in range(4, len(history) + 1, 2):
        guard.prepare(history[:n])
        records[n] = guard.export_state(history[:n])
    return records


def test_a_fresh_guard_sends_the_same_prompt_after_restore() -> None:
    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    bases = {r["base"] for r in records.values()}
    assert len(bases) >= 3  # several prunings, so there is something to hand over
    other = ContextGuard(POLICY)
    other.restore_state(history, records)
    assert other.prepare(history).messages == one.prepare(history).messages
    # without the records a fresh guard prunes afresh: another prompt
    assert (
        ContextGuard(POLICY).prepare(history).messages != one.prepare(history).messages
    )


def test_a_stale_guard_follows_a_pruning_made_elsewhere() -> None:
    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    stale = ContextGuard(POLICY)  # served the first steps only
    _serve(stale, history[:8])
    stale.restore_state(history, records)
    assert stale.prepare(history).messages == one.prepare(history).messages


def test_records_are_small_and_json() -> None:
    import json

    records = _serve(ContextGuard(POLICY), _history(10))
    for record in records.values():
        assert set(record) <= {"base", "sent", "ratio"}
        assert len(json.dumps(record)) < 80
    assert ContextGuard(POLICY).export_state([]) == {}
    ContextGuard(POLICY).restore_state(_history(2), {})  # nothing to do


def _stamped(records: dict[int, Any], history: list[BaseMessage]) -> list[Any]:
    """The history with each reply's record beside it, as the middleware keeps it."""
    return [(m, records.get(i)) for i, m in enumerate(history)]


def test_the_needed_records_restore_what_all_records_do() -> None:
    from langchain_context_guard.engine.incremental._handover import needed_records

    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    pairs = _stamped(records, history)
    by_id = {id(m): r for m, r in pairs}
    read: list[int] = []

    def lookup(message: BaseMessage) -> Any:
        read.append(id(message))
        return by_id[id(message)]

    needed = needed_records(history, lookup)
    assert set(needed) < set(records)  # fewer records ...
    assert len(read) < len(history) // 2  # ... and not a scan of the history
    other = ContextGuard(POLICY)
    other.restore_state(history, needed)
    assert other.prepare(history).messages == one.prepare(history).messages


def test_kept_records_stay_two_and_restore_what_all_records_do() -> None:
    from langchain_context_guard.engine.incremental._handover import keep_records

    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    kept: dict[int, Any] = {}
    for at, record in _serve(one, served).items():
        kept = keep_records(kept, at, record)
        assert len(kept) <= 2
    other = ContextGuard(POLICY)
    other.restore_state(history, kept)
    assert other.prepare(history).messages == one.prepare(history).messages
