"""``prepare`` under adversarial histories: the corners where bugs lived.

Histories that open with an assistant message, empty and whitespace-only content,
duplicated, blank and missing tool-call ids (also repeated ``tool_use`` blocks in
one message), orphan results, ``invalid_tool_calls``, thinking blocks in list
content, 200k-character results, results whose block lists hold images beside a
long text, and malformed handover records given first; budgets drawn close to
the history's own size; zero safety margins. One example checks every property:
``prepare`` raises only ``BudgetExceededError`` and only when even the least it
must keep is over; the output fits, pairs, and leaves the input unchanged; the
same input gives the same output; preparing the output again changes nothing.
2,000 examples (small histories, so the run takes about a minute of CPU), drawn
as four tests of 500 (``SHARDS``), which the parallel test run spreads over its
workers; each draws its own random examples.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
)
from langchain_context_guard.engine._policy_checks import MIN_BUDGET_TOKENS
from langchain_context_guard.engine.tokens._anchor import Gauge
from langchain_context_guard.engine.tokens._counters import REPLY_OVERHEAD
from tests.engine._support import pairing_errors, snapshot

EXAMPLES = 2_000
SHARDS = 4
ADVERSARIAL = settings(
    max_examples=EXAMPLES // SHARDS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
COUNTER = TiktokenCounter()
BIG = "x = compute(y)  # 200k\n" * 8_700  # ~200k characters, built once
THINKING = {"type": "thinking", "thinking": "let me think " * 20, "signature": "c2ln"}
IMAGE = {
    "type": "image",
    "source_type": "base64",
    "data": "aGk=",
    "mime_type": "image/png",
}
BAD_RECORDS = [
    {"ratio": float("inf")},
    {"ratio": float("nan"), "base": 1},
    {"ratio": 1e12},
    {"sent": []},
    {"sent": [float("inf"), True]},
    {"sent": [10**15, True], "base": 1},
    {"base": 10**20},
    {"base": -3, "ratio": 1.0},
    {"v": 4, "base": 1},
    {"v": 3, "base": 1, "fp": "not a fingerprint"},
    {"v": 3, "base": 1, "head": 12},
    {"v": 2, "base": 1, "at": float("nan")},
    {"v": 2, "cold": True},
    {"base": 1, "extra": 1},
    "junk",
    None,
]
"""Handover records that fail the schema: each must be ignored."""
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "path/to/file.py", "Error:"]


def _text(draw: Any, images: bool = False) -> Any:
    kinds = ["words"] * 6 + ["empty", "blank", "big", "list"]
    kind = draw(st.sampled_from(kinds + ["images"] * 2 if images else kinds))
    if kind == "empty":
        return ""
    if kind == "blank":
        return " \n\t "
    if kind == "big":
        return BIG
    words = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=60)))
    if kind == "images":
        text = {"type": "text", "text": BIG if draw(st.booleans()) else words}
        return [IMAGE, text, IMAGE][: draw(st.sampled_from([2, 3]))]
    if kind == "list":
        blocks: list[Any] = [{"type": "text", "text": words}]
        if draw(st.booleans()):
            blocks.insert(0, THINKING)
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": ""})
        return blocks
    return words


@st.composite
def histories(draw: Any) -> list[BaseMessage]:
    """Small adversarial histories (at most ~14 messages)."""
    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage("You are an agent. " * draw(st.integers(1, 40))))
    ids = ["c0", "c1", "c2", "c0", ""]  # repeats and a blank one
    n = 0
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(
            st.sampled_from(["user", "ai", "ai", "call", "call", "result", "invalid"])
        )
        n += 1
        mid = f"m{n}"
        if kind == "user":
            out.append(HumanMessage(_text(draw), id=mid))
        elif kind == "ai":
            out.append(AIMessage(_text(draw), id=mid))
        elif kind == "call":
            calls = [
                {"id": draw(st.sampled_from(ids)), "name": "bash", "args": {"n": k}}
                for k in range(draw(st.integers(1, 2)))
            ]
            content = _text(draw) if draw(st.booleans()) else ""
            if draw(st.booleans()):  # as Anthropic sends them, one repeated
                uses = [
                    {"type": "tool_use", "id": c["id"], "name": "bash", "input": {}}
                    for c in [*calls, calls[0]]
                ]
                content = [{"type": "text", "text": "calling"}, *uses]
            out.append(AIMessage(content, tool_calls=calls, id=mid))
            for call in calls:
                fate = draw(st.sampled_from(["ok", "ok", "ok", "missing", "twice"]))
                if fate == "missing":
                    continue
                for _ in range(2 if fate == "twice" else 1):
                    out.append(
                        ToolMessage(
                            _text(draw, images=True),
                            tool_call_id=call["id"],
                            id=f"r{n}",
                        )
                    )
                    n += 1
        elif kind == "result":  # an orphan
            out.append(
                ToolMessage(_text(draw), tool_call_id=draw(st.sampled_from(ids)))
            )
        else:
            out.append(
                AIMessage(
                    _text(draw) if draw(st.booleans()) else "",
                    invalid_tool_calls=[
                        {
                            "type": "invalid_tool_call",
                            "id": draw(st.sampled_from(ids)),
                            "name": "bash",
                            "args": "{broken",
                            "error": "bad JSON",
                        }
                    ],
                    id=mid,
                )
            )
    if draw(st.booleans()):
        out.append(HumanMessage(_text(draw), id="last"))
    return out


class Case:
    """A history and a policy, with a short repr (a 200k-char result is not shown)."""

    def __init__(
        self,
        history: list[BaseMessage],
        policy: GuardPolicy,
        records: dict[int, Any] | None = None,
    ) -> None:
        self.history, self.policy = history, policy
        self.records = records or {}

    def __repr__(self) -> str:
        def one(m: BaseMessage) -> str:
            c = m.content
            size = len(c) if isinstance(c, str) else f"list{len(c)}"
            calls = [x["id"] for x in getattr(m, "tool_calls", None) or []]
            bad = [x.get("id") for x in getattr(m, "invalid_tool_calls", None) or []]
            ref = getattr(m, "tool_call_id", None)
            return (
                f"{type(m).__name__[:-7]}({size},{calls or ''}{bad or ''}{ref or ''})"
            )

        fields = {k: getattr(self.policy, k) for k in self.policy.model_fields_set}
        shown = ", ".join(map(one, self.history))
        return f"Case([{shown}], {fields}, records={self.records})"


@st.composite
def cases(draw: Any) -> Case:
    """A history and a policy whose budget lies close to the history's size."""
    history = draw(histories())
    size = ContextGuard(token_counter=COUNTER).count_tokens(history)
    reserve = draw(st.sampled_from([0, 100, 1_000]))
    factor = draw(st.sampled_from([0.3, 0.7, 0.9, 0.97, 1.0, 1.03, 1.1, 2.0]))
    window = max(int(size * factor) + reserve, reserve + MIN_BUDGET_TOKENS, 200)
    margin = draw(st.sampled_from([0.0, 0.0, 0.05]))
    policy = GuardPolicy(
        context_window=window,
        reserve_tokens=reserve,
        hard_min_tokens=0,
        warn_below_tokens=0,
        safety_margin=margin,
        uncalibrated_margin=margin,
        trim_step=draw(st.sampled_from([0.0, 0.15])),
        keep_first_user=draw(st.booleans()),
        keep_recent_tool_results=draw(st.sampled_from([0, 3])),
        compress_batch=draw(st.sampled_from([1, 8])),
        digest=draw(st.booleans()),
        stable_prefix=draw(st.booleans()),
        max_tool_result_chars=draw(st.sampled_from([5_000, 50_000])),
    )
    records = draw(
        st.dictionaries(
            st.integers(1, max(len(history), 1)), st.sampled_from(BAD_RECORDS)
        )
    )
    return Case(history, policy, records)


def _least_kept(history: list[BaseMessage], policy: GuardPolicy) -> list[BaseMessage]:
    """What ``prepare`` may never drop from a history ending with a user message.

    The system messages, the first user message (``keep_first_user``) and the
    last one; everything else can go.
    """
    system = [m for m in history if isinstance(m, SystemMessage)]
    users = [m for m in history if isinstance(m, HumanMessage) and _text_of(m)]
    kept = users[:1] if policy.keep_first_user else []
    return [*system, *kept, *(m for m in users[-1:] if m not in kept)]


def _text_of(message: BaseMessage) -> bool:
    content = message.content
    if isinstance(content, str):
        return bool(content.strip())
    return any(
        not isinstance(b, dict) or b.get("type") != "text" or str(b.get("text")).strip()
        for b in content
    )


@pytest.mark.parametrize("shard", range(SHARDS))
@ADVERSARIAL
@given(cases())
def test_every_property_on_adversarial_histories(shard: int, case: Case) -> None:
    history, policy = case.history, case.policy
    before = snapshot(history)
    guard = ContextGuard(policy, token_counter=COUNTER)
    try:
        guard.restore_state(history, case.records)  # malformed: ignored
        result = guard.prepare(history)
    except BudgetExceededError as err:
        event("raised BudgetExceededError")
        assert snapshot(history) == before
        assert err.tokens > err.budget
        # Raised only when no valid output exists: for a history ending with a
        # user message, even what can never be dropped is over the budget.
        if isinstance(history[-1], HumanMessage) and _text_of(history[-1]):
            body = sum(map(COUNTER.count_message, _least_kept(history, policy)))
            gauge = Gauge(1.0, REPLY_OVERHEAD, margin=policy.uncalibrated_margin)
            floor = gauge.planned(body, 0)  # what must fit, margin included
            assert floor > err.budget, (floor, err.budget)
        return
    out = result.messages
    report = result.report
    event("trimmed" if len(out) < len(history) else "kept whole or grew")
    assert snapshot(history) == before  # input unchanged
    assert report.tokens_after <= report.budget  # within budget
    fresh = ContextGuard(policy, token_counter=COUNTER)
    assert fresh.count_tokens(out) <= report.budget
    assert pairing_errors(out) == []  # valid pairing
    for m in out:
        assert not getattr(m, "invalid_tool_calls", None)
        assert all(c["id"] for c in getattr(m, "tool_calls", None) or [])
        blocks = m.content if isinstance(m.content, list) else []
        uses = [b["id"] for b in blocks if isinstance(b, dict) and "id" in b]
        assert len(uses) == len(set(uses))  # no call id twice in one message
    # Same input, same output (a fresh guard, and this guard again).
    again = ContextGuard(policy, token_counter=COUNTER).prepare(history)
    assert snapshot(again.messages) == snapshot(out)
    assert snapshot(guard.prepare(history).messages) == snapshot(out)
    # prepare(prepare(x)) == prepare(x)
    twice = ContextGuard(policy, token_counter=COUNTER).prepare(out)
    assert snapshot(twice.messages) == snapshot(out)


def test_an_output_prepared_again_compresses_alike_at_the_trigger() -> None:
    """Found by the property above: a history opening with a large assistant
    message sat just under the compression trigger; the placeholder first turn
    that hygiene puts before it took the prepared output just over it, so
    preparing that output again compressed the assistant message."""
    call = {"id": "c0", "name": "bash", "args": {"n": 0}}
    history: list[BaseMessage] = [
        AIMessage(BIG[:200_100], tool_calls=[call], id="m1"),
        ToolMessage("alpha", tool_call_id="c0", id="r1"),
    ]
    policy = GuardPolicy(
        context_window=191_446,
        reserve_tokens=0,
        hard_min_tokens=0,
        digest=False,
        stable_prefix=False,
        max_tool_result_chars=5_000,
        safety_margin=0.0,
        warn_below_tokens=0,
        keep_first_user=False,
        keep_recent_tool_results=0,
        compress_batch=1,
        uncalibrated_margin=0.0,
        trim_step=0.0,
    )
    out = ContextGuard(policy, token_counter=COUNTER).prepare(history).messages
    again = ContextGuard(policy, token_counter=COUNTER).prepare(out).messages
    assert snapshot(again) == snapshot(out)


def test_an_answer_joined_to_the_calls_after_it_is_prepared_once() -> None:
    """Hygiene joins an answer with reasoning to the tool calls after it; the cut
    must plan the joined message as it planned the two, or ``prepare`` cuts its
    own output again."""
    calls = [{"id": f"c{k}", "name": "bash", "args": {"n": k}} for k in range(2)]
    history = [
        SystemMessage("You are an agent. "),
        *[HumanMessage("alpha", id=f"m{k}") for k in range(1, 6)],
        AIMessage([THINKING, {"type": "text", "text": "alpha"}], id="m6"),
        AIMessage("", tool_calls=calls, id="m7"),
        ToolMessage("", tool_call_id="c0", id="r7"),
        ToolMessage("alpha", tool_call_id="c1", id="r8"),
    ]
    policy = GuardPolicy(
        context_window=130,
        reserve_tokens=0,
        hard_min_tokens=0,
        warn_below_tokens=0,
        safety_margin=0.0,
        uncalibrated_margin=0.0,
        trim_step=0.0,
        keep_first_user=False,
        keep_recent_tool_results=0,
        compress_batch=1,
        stable_prefix=False,
    )
    out = ContextGuard(policy, token_counter=COUNTER).prepare(history).messages
    assert any(isinstance(m, AIMessage) and m.tool_calls for m in out)
    again = ContextGuard(policy, token_counter=COUNTER).prepare(out).messages
    assert snapshot(again) == snapshot(out)
