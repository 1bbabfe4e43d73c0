import itertools
import json
import logging

from langchain_core.messages import HumanMessage

from langchain_context_guard import ContextGuard, GuardEvent, GuardPolicy, GuardReport
from langchain_context_guard.engine._events import log_event
from tests.engine._support import agent_history, ai, call, result

POLICY = GuardPolicy(
    context_window=32_000,
    reserve_tokens=4_000,
    compress_batch=1,
    keep_recent_tool_results=20,
    digest=True,
)


def test_every_change_is_an_event_with_messages_tokens_and_budget():
    history = agent_history(60, result_chars=6_000)
    history.append(HumanMessage("", id="empty"))  # sanitize drops it
    history[11] = result("c4", "x" * 80_000, id="t4")  # truncate
    report = ContextGuard(POLICY).prepare(history).report
    kinds = [e.kind for e in report.events]
    assert kinds == ["sanitize", "truncate", "compress", "trim", "digest"]
    by_kind = {e.kind: e for e in report.events}
    assert by_kind["sanitize"].removed == ("empty",)
    assert by_kind["truncate"].changed == ("t4",)
    assert (
        "t0" in by_kind["compress"].changed and "t59" not in by_kind["compress"].changed
    )
    assert by_kind["trim"].removed and not by_kind["trim"].added
    for e in report.events:
        assert e.budget == 28_000
        if e.kind == "digest":  # the one pass that adds: a note on what went
            assert 0 < e.tokens_before < e.tokens_after
        else:
            assert e.tokens_before >= e.tokens_after > 0
    chain = [report.tokens_before] + [
        e.tokens_after for e in report.events if e.kind != "digest"
    ]
    assert all(a >= b for a, b in itertools.pairwise(chain))
    assert report.tokens_after == report.events[-1].tokens_after <= report.budget
    assert report.changed


def test_repair_and_hygiene_events_name_added_messages():
    history = [ai(call("a"), id="a1"), result("orphan", id="o1")]
    report = ContextGuard(POLICY).prepare(history).report
    repair = next(e for e in report.events if e.kind == "repair")
    assert repair.removed == ("o1",) and repair.added == ("context-guard-missing-a",)
    # A conversation may not open with the assistant (Anthropic, Gemini): the
    # placeholder user message goes first, and is named.
    hygiene = next(e for e in report.events if e.kind == "hygiene")
    assert hygiene.added == ("context-guard-history-start",)


def test_unchanged_history_has_no_events():
    report = ContextGuard(POLICY).prepare([HumanMessage("hi")]).report
    assert report.events == () and not report.changed
    assert report.tokens_before == report.tokens_after


def test_routine_pruning_logs_at_debug_and_never_warns(caplog):
    guard = ContextGuard(POLICY)
    history = agent_history(60, result_chars=6_000)
    history[11] = result("c4", "x" * 80_000, id="t4")
    with caplog.at_level(logging.DEBUG, logger="langchain_context_guard"):
        for end in range(20, len(history) + 1, 4):  # a growing agent history
            guard.prepare(history[:end])
    kinds = {r.getMessage().split(";")[0] for r in caplog.records}
    assert {"Context guard: trim", "Context guard: truncate"} <= kinds
    assert {r.levelname for r in caplog.records} == {"DEBUG"}
    trim = next(r.getMessage() for r in caplog.records if "trim" in r.getMessage())
    assert "removed" in trim and "budget 28,000" in trim and "dropped" in trim


def test_describe_and_to_dict():
    event = GuardEvent(
        "trim",
        removed=("a", "b"),
        tokens_before=5_000,
        tokens_after=3_000,
        budget=4_000,
        detail="d",
    )
    assert (
        event.describe() == "Context guard: trim; removed 2 message(s); "
        "tokens 5,000 -> 3,000 (budget 4,000); d"
    )
    assert event.to_dict()["removed"] == ["a", "b"]
    report = GuardReport(5_000, 3_000, 4_000, 8_000, "override", "c", (event,))
    assert json.loads(json.dumps(report.to_dict()))["events"][0]["kind"] == "trim"


def test_repr_counts_messages_by_event_instead_of_listing_ids():
    report = ContextGuard(POLICY).prepare(agent_history(60, result_chars=6_000)).report
    text = repr(report)
    assert "'t1'" not in text and "'a1'" not in text and len(text) < 300
    assert text.startswith(f"GuardReport(tokens_before={report.tokens_before:,}, ")
    assert "budget=28,000, context_window=32,000 (override)" in text
    trim = next(e for e in report.events if e.kind == "trim")
    assert f"'trim': {len(trim.removed)}" in text
    assert repr(trim).startswith(
        f"GuardEvent('trim', changed=0, removed={len(trim.removed)}"
    )


def test_log_event_levels(caplog):
    with caplog.at_level(logging.DEBUG, logger="langchain_context_guard"):
        for kind in ("repair", "truncate", "trim", "window_warning"):
            log_event(GuardEvent(kind))
        log_event(GuardEvent("compaction_failed"))
    levels = [r.levelname for r in caplog.records]
    assert levels == ["DEBUG", "DEBUG", "DEBUG", "INFO", "WARNING"]
