"""Invariants of ``ContextGuard.prepare`` over generated agent transcripts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from tests._engine_support import pairing_errors, snapshot

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
IMAGE = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64," + "QUJD" * 2_000},
}
THINKING = {"type": "thinking", "thinking": "pondering " * 30, "signature": "c2ln"}


def _text(seed: int, words: int) -> str:
    return " ".join(f"w{(seed * 7 + i) % 997}" for i in range(words)) or "x"


@st.composite
def transcripts(draw, *, usage: bool = False) -> list[BaseMessage]:  # noqa: C901
    out: list[BaseMessage] = []
    serial = 0
    for _ in range(draw(st.integers(0, 2))):
        out.append(SystemMessage(_text(serial, draw(st.integers(1, 300)))))
        serial += 1
    pending: list[ToolMessage] = []  # results to misplace later
    for turn in range(draw(st.integers(1, 5))):
        content: object = _text(serial, draw(st.integers(1, 400)))
        if draw(st.booleans()):
            content = [{"type": "text", "text": content}, IMAGE]
        out.append(HumanMessage(content, id=f"u{turn}"))
        for step in range(draw(st.integers(0, 5))):
            n_calls = draw(st.integers(0, 3))
            ids = [f"c{turn}-{step}-{j}" for j in range(n_calls)]
            blocks: list[object] = [THINKING] if draw(st.booleans()) else []
            blocks.append(
                {"type": "text", "text": _text(serial, draw(st.integers(0, 60)))}
            )
            kwargs = {}
            if usage and draw(st.booleans()):
                n = draw(st.integers(100, 30_000))
                kwargs["usage_metadata"] = {
                    "input_tokens": n,
                    "output_tokens": 50,
                    "total_tokens": n + 50,
                }
            out.append(
                AIMessage(
                    blocks,
                    tool_calls=[
                        {"id": i, "name": "bash", "args": {"cmd": i}} for i in ids
                    ],
                    id=f"a{turn}-{step}",
                    **kwargs,
                )
            )
            for i in ids:
                size = draw(st.sampled_from([1, 50, 800, 6_000]))
                res = ToolMessage(_text(serial, size), tool_call_id=i, id=f"r{i}")
                serial += 1
                fate = draw(
                    st.sampled_from(["ok"] * 6 + ["missing", "duplicate", "displaced"])
                )
                if fate == "ok":
                    out.append(res)
                elif fate == "duplicate":
                    out.extend([res, res.model_copy(update={"id": f"d{i}"})])
                elif fate == "displaced":
                    pending.append(res)
        if draw(st.booleans()):
            out.append(
                AIMessage(_text(serial, draw(st.integers(1, 200))), id=f"f{turn}")
            )
    if pending and draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), pending[0])
    if draw(st.booleans()):
        out.append(ToolMessage("stray", tool_call_id="nobody", id="orphan"))
    return out


POLICIES = st.builds(
    GuardPolicy,
    context_window=st.sampled_from([16_000, 20_000, 40_000]),
    reserve_tokens=st.sampled_from([1_000, 4_000]),
    compress_batch=st.sampled_from([1, 8]),
    keep_recent_tool_results=st.sampled_from([0, 6]),
    keep_recent_thinking=st.sampled_from([0, 1]),
    trim_step=st.sampled_from([0.0, 0.15]),
)


def _prepare(policy, history):
    try:
        return ContextGuard(policy).prepare(history)
    except BudgetExceededError as err:
        assert err.tokens > err.budget
        return None


@SETTINGS
@given(transcripts(usage=True), POLICIES)
def test_fits_pairs_keeps_and_never_mutates(history, policy):
    before = snapshot(history)
    result = _prepare(policy, history)
    assert snapshot(history) == before
    if result is None:
        return
    out = result.messages
    assert result.report.tokens_after <= result.report.budget
    assert pairing_errors(out) == []
    for m in history:
        if isinstance(m, SystemMessage):
            assert any(o is m for o in out)
    users = [m for m in history if isinstance(m, HumanMessage)]
    assert any(o is users[-1] for o in out)
    first = next(m for m in out if not isinstance(m, SystemMessage))
    assert isinstance(first, HumanMessage)


@SETTINGS
@given(transcripts(), POLICIES)
def test_idempotent_and_deterministic(history, policy):
    result = _prepare(policy, history)
    if result is None:
        return
    again = ContextGuard(policy).prepare(history)
    assert snapshot(again.messages) == snapshot(result.messages)
    assert again.report.to_dict() == result.report.to_dict()
    twice = ContextGuard(policy).prepare(result.messages)
    assert snapshot(twice.messages) == snapshot(result.messages)
    assert [e for e in twice.report.events if e.kind != "window_warning"] == []
