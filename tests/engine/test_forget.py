"""A guard that lets go of long-cut rewrites gives what a guard keeping them gives.

``_release.forget_head`` empties, after a pruning, the places of messages that no
later cut can keep; a step that would read one raises ``HeadForgotten`` and the
pruning runs afresh. These tests let go much sooner than the guard does (every
pruning, with a small or no margin before the cut, so that cuts do reach back)
and hold the outputs and reports to those of a guard that keeps everything.
"""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
)
from langchain_context_guard.engine import _guard, _messages
from langchain_context_guard.engine.incremental import _prune as _prune
from langchain_context_guard.engine.incremental import _release as _forget
from langchain_context_guard.engine.incremental._order import PASSES
from langchain_context_guard.replay._transcripts import (
    load_trajectories,
    shared_trajectory_dir,
)
from tests.engine._support import ai, call, lines, result, snapshot, transcripts
from tests.engine.test_incremental import _agent, _chat

COUNTER = TiktokenCounter()

TRUNCATE = PASSES.index("truncate")
"""Where the truncate pass's step is in a record."""


def _forgetting(monkeypatch: pytest.MonkeyPatch, margin: float) -> Counter[str]:
    """Let go at every pruning, ``margin`` budgets before the cut.

    Counts the prunings that let go of something and the fallbacks.
    """
    seen: Counter[str] = Counter()
    real = _prune._prune

    def counted(*args: Any) -> Any:
        try:
            return real(*args)
        except _prune.HeadForgotten:
            seen["fallbacks"] += 1
            raise

    def forget_head(record: Any, budget: int, counter: Any) -> Any:
        kept = _forget.forget_head(record, int(budget * margin), 1, counter)
        seen["emptied"] += any(s.stale for s in kept.steps) and kept is not record
        return kept

    monkeypatch.setattr(_prune, "_prune", counted)
    monkeypatch.setattr(_guard, "forget_head", forget_head)
    return seen


def _outcomes(
    policy: GuardPolicy, history: list[BaseMessage], ends: list[int], rebuilt: bool
) -> list[Any]:
    guard = ContextGuard(policy, token_counter=COUNTER)
    out: list[Any] = []
    for n in ends:
        given = history[:n]
        if rebuilt:  # as a checkpointer gives it back: equal copies
            given = messages_from_dict(messages_to_dict(given))
        try:
            got = guard.prepare(given)
        except BudgetExceededError as err:
            out.append(("error", err.tokens, err.budget))
            continue
        out.append((snapshot(got.messages), got.report.to_dict()))
    return out


def _compare(
    monkeypatch: pytest.MonkeyPatch,
    policy: GuardPolicy,
    history: list[BaseMessage],
    margin: float,
    ends: list[int] | None = None,
    rebuilt: bool = False,
    emptied: bool = True,
) -> Counter[str]:
    ends = ends or list(range(1, len(history) + 1))
    with monkeypatch.context() as keeping:
        keeping.setattr(_guard, "forget_head", lambda record, *_, **__: record)
        kept = _outcomes(policy, history, ends, rebuilt)
    seen = _forgetting(monkeypatch, margin)
    assert _outcomes(policy, history, ends, rebuilt) == kept
    assert seen["emptied"] or not emptied  # places were emptied: this tested it
    return seen


def _deduped_agent(steps: int) -> list[BaseMessage]:
    """An agent that writes each command in a fenced block and calls it too."""
    history: list[BaseMessage] = [
        SystemMessage("You are a coding agent.", id="sys"),
        HumanMessage("Fix the bug in the parser.", id="task"),
    ]
    for k in range(steps):
        cmd = f"grep -n parse src/module_{k}.py"
        text = f"Step {k}: I look at the parser.\n```bash\n{cmd}\n```"
        history.append(ai(call(f"c{k}", cmd=cmd), content=text, id=f"a{k}"))
        size = (k * 7) % 5 + 1
        history.append(result(f"c{k}", lines(size * 40, f"r{k}"), id=f"t{k}"))
    return history


HISTORIES: dict[str, Callable[[], list[BaseMessage]]] = {
    "agent": lambda: _agent(160),
    "deduped": lambda: _deduped_agent(160),
    "reasoning-chat": lambda: _chat(50),
}


@pytest.mark.parametrize("stable", [False, True], ids=["passes", "stable"])
@pytest.mark.parametrize("margin", [0.2, 0.0], ids=["fifth", "none"])
@pytest.mark.parametrize("name", list(HISTORIES))
def test_letting_go_gives_what_keeping_gives_call_by_call(
    monkeypatch: pytest.MonkeyPatch, name: str, margin: float, stable: bool
) -> None:
    policy = GuardPolicy(
        stable_prefix=stable,
        context_window=16_000,
        reserve_tokens=2_000,
        keep_recent_tool_results=2,
        compress_batch=2,
        interactive_tuning=False,  # a reply's turns digest: TURNS_DIGESTS below
    )
    history = HISTORIES[name]()
    seen = _compare(monkeypatch, policy, history, margin)
    if margin == 0.0 and not stable:
        assert seen["fallbacks"]  # the cut did reach back: the pruning ran afresh


def _writing_agent(steps: int) -> list[BaseMessage]:
    """An agent whose calls write long files and whose results are long logs.

    A turns digest cuts each turn to its call's first and last lines and a
    placeholder: it weighs many more turns than a budget of their compressed
    sizes holds.
    """
    history: list[BaseMessage] = [
        SystemMessage("You write the modules.", id="sys"),
        HumanMessage("Write the parser modules.", id="task"),
    ]
    for k in range(steps):
        body = "\n".join(f"def parse_{k}_{i}(text):  # line {i}" for i in range(120))
        write = {"path": f"src/parser_{k}.py", "content": body}
        history.append(ai(call(f"c{k}", name="write", **write), id=f"a{k}"))
        log = "\n".join(f"log {k} {i} " + "x" * 60 for i in range(400))
        history.append(result(f"c{k}", f"wrote src/parser_{k}.py\n{log}", id=f"t{k}"))
    return history


TURNS = {"digest": True, "digest_form": "turns"}
TURNS_DIGESTS = {  # history, policy settings, margin; whether places are emptied
    "turns-guards-margin": (lambda: _writing_agent(150), TURNS, 1.0, True),
    "turns-fifth": (lambda: _writing_agent(150), TURNS, 0.2, True),
    "replied-fifth": (lambda: _chat(50), {"interactive_tuning": True}, 0.2, False),
    "replied-none": (lambda: _chat(50), {"interactive_tuning": True}, 0.0, False),
}


@pytest.mark.parametrize("case", list(TURNS_DIGESTS))
def test_letting_go_gives_what_keeping_gives_under_a_turns_digest(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    make, settings, margin, emptied = TURNS_DIGESTS[case]
    policy = GuardPolicy(
        stable_prefix=False,
        context_window=16_000,
        reserve_tokens=2_000,
        keep_recent_tool_results=2,
        compress_batch=2,
        **settings,
    )
    _compare(monkeypatch, policy, make(), margin, emptied=emptied)


def test_letting_go_with_the_guards_margin_gives_what_keeping_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    history = _deduped_agent(900)
    ends = list(range(2, len(history) + 1, 6))
    _compare(monkeypatch, policy, history, 1.0, ends)


@pytest.mark.parametrize("margin", [0.2, 0.0], ids=["fifth", "none"])
def test_letting_go_gives_what_keeping_gives_when_rebuilt_from_a_checkpoint(
    monkeypatch: pytest.MonkeyPatch, margin: float
) -> None:
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    history = _deduped_agent(120)
    ends = list(range(2, len(history) + 1, 2))
    _compare(monkeypatch, policy, history, margin, ends, rebuilt=True)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    transcripts(usage=True),
    st.sampled_from([0.0, 0.3, 1.0]),
    st.sampled_from([1, 3]),
    st.sampled_from([0, 1]),
    st.booleans(),
    st.sampled_from([{}, TURNS, {"interactive_tuning": True}]),
)
def test_letting_go_gives_what_keeping_gives_on_any_transcript(
    history: list[BaseMessage],
    margin: float,
    batch: int,
    thinking: int,
    assistant: bool,
    digest: dict[str, Any],
) -> None:
    policy = GuardPolicy(
        stable_prefix=False,
        context_window=16_000,
        reserve_tokens=4_000,
        compress_batch=batch,
        keep_recent_tool_results=2,
        keep_recent_thinking=thinking,
        compress_assistant_text=assistant,
        max_chars_per_message=6_000,
        **digest,
    )
    with pytest.MonkeyPatch.context() as patch:
        _compare(patch, policy, history, margin, emptied=False)


def test_the_rewrites_of_messages_cut_long_before_are_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(  # the guard's margin, a smaller chunk
        _guard,
        "forget_head",
        lambda r, b, counter: _forget.forget_head(r, b, chunk=64, counter=counter),
    )
    history = _deduped_agent(400)
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    guard = ContextGuard(policy, token_counter=COUNTER)
    guard.prepare(history[:20])
    early = history[4]
    assert isinstance(early, AIMessage)
    rewrite = weakref.ref(guard._record.steps[TRUNCATE].result[4])
    assert rewrite() is not early and rewrite() is not None  # deduplicated
    for n in range(22, len(history) + 1, 2):
        guard.prepare(history[:n])
    gc.collect()
    record = guard._record
    assert record is not None and record.forgot > 100
    assert rewrite() is None
    assert id(early) not in _messages._rewrites
    assert record.steps[TRUNCATE].result[4] is early
    assert all(step.stale <= len(step.result) for step in record.steps)
    # What is sent still has its repeated commands dropped.
    sent = guard.prepare(history).messages
    last = next(m for m in reversed(sent) if isinstance(m, AIMessage))
    assert "```" not in str(last.content)


DATA = shared_trajectory_dir()


@pytest.mark.skipif(DATA is None, reason="shared trajectories absent")
@pytest.mark.parametrize("margin", [0.2, 0.0], ids=["fifth", "none"])
def test_letting_go_gives_what_keeping_gives_on_shared_trajectories(
    monkeypatch: pytest.MonkeyPatch, margin: float
) -> None:
    assert DATA is not None
    runs = sorted(load_trajectories(DATA).items(), key=lambda run: -len(run[1]))[:3]
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    for _, messages in runs:
        calls = [k for k, m in enumerate(messages) if isinstance(m, AIMessage)]
        with monkeypatch.context() as patch:
            _compare(patch, policy, messages, margin, calls)
