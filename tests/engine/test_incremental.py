"""A guard that grows its previous call's work gives what a fresh guard gives.

``ContextGuard`` keeps the steps of its last call and, when the next history
extends that one, each pass only looks at the new messages (``_steps``). These
tests hold it to the from-scratch result, message for message and event for
event, and check that the trim cut never moves back as a history grows.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
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
from langchain_context_guard.engine.incremental import _trim_step as _trim_step
from langchain_context_guard.replay._transcripts import (
    load_trajectories,
    shared_trajectory_dir,
)
from tests.engine._support import (
    POLICY_KNOBS,
    THINKING,
    ai,
    call,
    filler,
    fresh_like,
    lines,
    live_usage,
    result,
    snapshot,
    transcripts,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POLICIES = st.builds(
    GuardPolicy,
    **POLICY_KNOBS,
    compress_call_args=st.booleans(),
)
COUNTER = TiktokenCounter()


def _outcome(guard: ContextGuard, history: list[BaseMessage]) -> Any:
    try:
        out = guard.prepare(history)
    except BudgetExceededError as err:
        return ("error", err.tokens, err.budget)
    report = out.report.to_dict()
    # A small window is warned about once per guard, not on every call.
    report["events"] = [e for e in report["events"] if e["kind"] != "window_warning"]
    return snapshot(out.messages), report


def _same_as_fresh(guard: ContextGuard, history: list[BaseMessage]) -> None:
    fresh = fresh_like(guard)
    assert _outcome(guard, history) == _outcome(fresh, history)


@SETTINGS
@given(transcripts(usage=True, names=True), POLICIES, st.data())
def test_growing_history_matches_a_fresh_guard_on_every_prefix(history, policy, data):
    start = data.draw(st.integers(1, len(history)))
    ends = [*range(start, min(start + 20, len(history)) + 1)]
    ends += data.draw(st.lists(st.integers(start, len(history)), max_size=5))
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in sorted(set(ends)):
        _same_as_fresh(guard, history[:n])


def _agent(steps: int, *, seed: int = 0) -> list[BaseMessage]:
    """An agent run whose tool results vary from a line to a long file."""
    sizes = [300, 4_000, 1_200, 9_000, 600, 20_000, 150, 2_500]
    history: list[BaseMessage] = [
        SystemMessage("You are a coding agent.", id="sys"),
        HumanMessage("Fix the bug in the parser.", id="task"),
    ]
    for k in range(steps):
        chars = sizes[(k * 5 + seed) % len(sizes)]
        history.append(ai(call(f"c{k}", cmd=f"cat f{k}.py"), id=f"a{k}"))
        history.append(result(f"c{k}", lines(chars // 36 + 1, f"r{k}"), id=f"t{k}"))
    return history


@pytest.mark.parametrize(
    "ratios",
    [[1.0], [1.15], [1.05, 1.3, 1.0, 1.2]],
    ids=["same", "provider-counts-more", "calibration-moves"],
)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"keep_recent_tool_results": 3, "trim_step": 0.5, "compress_trigger": 0.5},
        {"compress_batch": 1, "trim_step": 0.0},
    ],
    ids=["defaults", "keep3-step05-trigger05", "batch1-step0"],
)
def test_live_agent_with_usage_matches_a_fresh_guard_call_by_call(ratios, options):
    policy = GuardPolicy(
        stable_prefix=False, context_window=16_000, reserve_tokens=2_000, **options
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    live_usage(_agent(60), guard, ratios, _same_as_fresh)


THINK = {"type": "thinking", "thinking": "Let me think. " * 40, "signature": "c2ln"}


def _chat(turns: int) -> list[BaseMessage]:
    """Users asking in turn; the assistant reasons, calls tools, and answers, with
    some reasoning-only messages mid-turn (which reopen the turn after them)."""
    history: list[BaseMessage] = [SystemMessage("Be helpful.", id="sys")]
    for t in range(turns):
        history.append(HumanMessage(f"question {t} " + "word " * 150, id=f"u{t}"))
        for s in range(t % 4):
            if (t + s) % 3 == 2:
                history.append(AIMessage([THINK, {"type": "text", "text": "hmm"}]))
            history.append(ai(call(f"q{t}-{s}"), content=[THINK], id=f"a{t}-{s}"))
            size = 100 + 900 * ((t * 3 + s) % 5)
            history.append(result(f"q{t}-{s}", lines(size // 36 + 1), id=f"t{t}-{s}"))
        history.append(AIMessage([THINK, {"type": "text", "text": f"answer {t}"}]))
    return history


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"keep_recent_thinking": 0, "compress_batch": 2, "keep_recent_tool_results": 1},
        {"history_limit": 4, "trim_step": 0.0},
    ],
    ids=["defaults", "thinking0-batch2", "turn-limit4"],
)
def test_a_chat_with_reasoning_grown_message_by_message_matches(options):
    policy = GuardPolicy(
        stable_prefix=False, context_window=16_000, reserve_tokens=8_000, **options
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    history = _chat(30)
    for n in range(1, len(history) + 1):
        _same_as_fresh(guard, history[:n])


def test_a_history_that_starts_without_a_user_matches():
    history: list[BaseMessage] = [
        SystemMessage("sys", id="sys"),
        ai(call("c0"), id="a0"),
        result("c0", "ok", id="t0"),
        HumanMessage("hi", id="h"),
        ai(call("c1"), id="a1"),
        result("c1", "ok", id="t1"),
    ]
    guard = ContextGuard(
        GuardPolicy(stable_prefix=False, context_window=16_000), token_counter=COUNTER
    )
    for n in range(1, len(history) + 1):
        _same_as_fresh(guard, history[:n])


def test_every_single_message_prefix_matches_including_pending_calls():
    guard = ContextGuard(
        GuardPolicy(stable_prefix=False, context_window=16_000, reserve_tokens=2_000),
        token_counter=COUNTER,
    )
    history = _agent(50)
    for n in range(1, len(history) + 1):
        _same_as_fresh(guard, history[:n])  # ends with an unanswered call half the time


def test_an_unrelated_or_edited_history_is_computed_afresh():
    guard = ContextGuard(
        GuardPolicy(stable_prefix=False, context_window=16_000, reserve_tokens=2_000),
        token_counter=COUNTER,
    )
    one, two = _agent(40), _agent(40, seed=3)
    _same_as_fresh(guard, one)
    _same_as_fresh(guard, two)  # not an extension of ``one``
    edited = list(one)
    edited[5] = edited[5].model_copy(update={"content": "rewritten"})
    _same_as_fresh(guard, edited)
    changed = list(one)
    changed[7].content = "edited in place"  # same object, new content
    _same_as_fresh(guard, [*changed, HumanMessage("next", id="n")])


def test_a_warm_call_plans_no_new_cut_between_moves(monkeypatch):
    guard = ContextGuard(
        GuardPolicy(
            stable_prefix=False,
            context_window=32_000,
            reserve_tokens=4_000,
            trim_step=0.5,
        ),
        token_counter=COUNTER,
    )
    history = _agent(120)
    guard.prepare(history[:-2])
    plans = []
    original = _trim_step.plan_cut

    def counting(*args: Any, **kwargs: Any) -> Any:
        plans.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_trim_step, "plan_cut", counting)
    full = [len(plans)]
    for n in range(len(history) - 40, len(history) + 1, 2):
        guard.prepare(history[:n])
        full.append(len(plans))
    calls = len(full) - 1
    assert plans and len(plans) < calls / 2  # most calls grow the previous cut


def test_a_guard_shared_by_threads_gives_each_history_its_own_result():
    policy = GuardPolicy(
        stable_prefix=False, context_window=16_000, reserve_tokens=2_000
    )
    histories = [_agent(40, seed=s) for s in range(4)]
    for h, history in enumerate(histories):  # distinct ids per thread
        histories[h] = [m.model_copy(update={"id": f"{h}-{m.id}"}) for m in history]
        for m in histories[h]:
            for c in getattr(m, "tool_calls", []):
                c["id"] = f"{h}-{c['id']}"
            if hasattr(m, "tool_call_id"):
                m.tool_call_id = f"{h}-{m.tool_call_id}"
    expected = [
        [_outcome(ContextGuard(policy), hist[:n]) for n in range(4, len(hist), 3)]
        for hist in histories
    ]
    shared = ContextGuard(policy)
    got: list[list[Any]] = [[] for _ in histories]

    def work(h: int) -> None:
        got[h] = [_outcome(shared, histories[h][:n]) for n in range(4, 82, 3)]

    threads = [threading.Thread(target=work, args=(h,)) for h in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def _first_kept(history: list[BaseMessage], sent: list[BaseMessage]) -> int:
    """Index in ``history`` of the first message sent after the system prompt and
    the task (the cut), or ``len(history)`` when only those are sent."""
    where = {m.id: i for i, m in enumerate(history) if m.id}
    kept = [
        where[m.id]
        for m in sent
        if m.id in where and where[m.id] > 1 and not isinstance(m, SystemMessage)
    ]
    return min(kept, default=len(history))


def _cuts(guard: ContextGuard, history: list[BaseMessage], start: int) -> list[int]:
    return [
        _first_kept(history[:n], guard.prepare(history[:n]).messages)
        for n in range(start, len(history) + 1)
    ]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"keep_recent_tool_results": 3, "trim_step": 0.5},
        {"compress_batch": 1, "keep_recent_tool_results": 0},
        {"trim_step": 0.0, "compress_trigger": 0.5},
        {"keep_recent_tool_results": 12, "compress_batch": 16},
    ],
    ids=["defaults", "keep3-step05", "batch1-keep0", "step0-trigger05", "keep12"],
)
def test_the_cut_never_moves_back_as_an_agent_history_grows(options):
    guard = ContextGuard(
        GuardPolicy(
            stable_prefix=False, context_window=16_000, reserve_tokens=2_000, **options
        ),
        token_counter=COUNTER,
    )
    cuts = _cuts(guard, _agent(150), start=3)
    assert all(a <= b for a, b in itertools.pairwise(cuts)), cuts
    assert cuts[-1] > 2  # it did trim


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from([40, 400, 2_000, 8_000, 30_000]), min_size=20, max_size=70
    ),
    POLICIES,
)
@example(  # once a gap: the last result is smaller than its synthetic stand-in
    [40] * 8 + [400, 2_000, 2_000, 2_000, 400, 2_000, 8_000] + [30_000] * 4 + [40],
    GuardPolicy(
        context_window=40_000,
        reserve_tokens=1_000,
        compress_batch=3,
        keep_recent_tool_results=6,
        trim_step=0.0,
        stable_prefix=False,
    ),
)
def test_the_cut_never_moves_back_for_any_result_sizes(sizes, policy):
    history: list[BaseMessage] = [
        SystemMessage("s", id="sys"),
        HumanMessage("t", id="task"),
    ]
    for k, chars in enumerate(sizes):
        history.append(ai(call(f"c{k}"), id=f"a{k}"))
        history.append(result(f"c{k}", lines(chars // 36 + 1, f"r{k}"), id=f"t{k}"))
    guard = ContextGuard(policy, token_counter=COUNTER)
    cuts = _cuts(guard, history, start=4)
    assert all(a <= b for a, b in itertools.pairwise(cuts))


SMALL = ("ok", "[]", "done", "x" * 40)
"""Results smaller than the synthetic result sent for an open call (~35 tokens)."""
STEPS = st.lists(
    st.tuples(
        st.integers(0, 9),  # 0: a user message first
        st.lists(  # the step's parallel calls: tool name, result size (0: small)
            st.tuples(
                st.sampled_from(["bash", "read_file", "x"]),
                st.sampled_from([0, 0, 40, 400, 2_000, 8_000, 30_000]),
                st.sampled_from(SMALL),
            ),
            min_size=1,
            max_size=3,
        ),
    ),
    min_size=10,
    max_size=45,
)


def _parallel_steps(steps: list[tuple[int, list[tuple[str, int, str]]]]) -> Any:
    """An agent run of parallel calls per step, results from "ok" to 30k chars."""
    history: list[BaseMessage] = [
        SystemMessage("s", id="sys"),
        HumanMessage("t", id="task"),
    ]
    for k, (user, calls) in enumerate(steps):
        if user == 0:
            history.append(HumanMessage(f"more {k}", id=f"u{k}"))
        history.append(
            ai(*(call(f"c{k}-{j}", n) for j, (n, _, _) in enumerate(calls)), id=f"a{k}")
        )
        for j, (_, chars, small) in enumerate(calls):
            body = lines(chars // 36) if chars else small
            history.append(result(f"c{k}-{j}", body, id=f"t{k}-{j}"))
    return history


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS, POLICIES)
def test_the_cut_never_moves_back_when_results_are_smaller_than_their_stand_ins(
    steps, policy
):
    """Every prefix is prepared, those that end in open calls too (sent with
    synthetic results, which a small real result then replaces): the cut never
    moves back, every prompt fits, and a guard grown call by call as an agent
    calls (after each step's results) gives what a fresh guard gives."""
    history = _parallel_steps(steps)
    guard = ContextGuard(policy, token_counter=COUNTER)
    cuts = []
    for n in range(3, len(history) + 1):
        out = guard.prepare(history[:n])
        assert out.report.tokens_after <= out.report.budget
        cuts.append(_first_kept(history[:n], out.messages))
    assert all(a <= b for a, b in itertools.pairwise(cuts)), cuts
    agent = ContextGuard(policy, token_counter=COUNTER)
    for n in range(3, len(history) + 1):
        if n == len(history) or not isinstance(history[n], ToolMessage):
            _same_as_fresh(agent, history[:n])


DATA = shared_trajectory_dir()


@pytest.mark.skipif(DATA is None, reason="shared trajectories absent")
@pytest.mark.parametrize(
    ("window", "assistant"),
    # At 32k, with old assistant text compressed, every history fits: no cut to
    # move, so that window runs without it.
    [(16_000, True), (32_000, False)],
    ids=["16k", "32k"],
)
def test_the_cut_never_moves_back_on_the_shared_trajectories(window, assistant):
    assert DATA is not None
    policy = GuardPolicy(
        stable_prefix=False,
        context_window=window,
        reserve_tokens=window // 8,
        compress_assistant_text=assistant,
    )
    moves = 0
    for messages in load_trajectories(DATA).values():
        plain = [
            m.model_copy(update={"usage_metadata": None})
            if isinstance(m, AIMessage)
            else m
            for m in messages
        ]
        calls = [k for k, m in enumerate(plain) if isinstance(m, AIMessage)]
        guard = ContextGuard(policy, token_counter=COUNTER)
        cuts = [
            _first_kept(plain[:k], guard.prepare(plain[:k]).messages) for k in calls
        ]
        assert all(a <= b for a, b in itertools.pairwise(cuts))
        moves += sum(a < b for a, b in itertools.pairwise(cuts))
    assert moves > 0


_X = "x" * 40
_HELD_STEPS = [
    (0, [("bash", 8_000, _X), ("bash", 40, "done"), ("read_file", 400, _X)]),
    (0, [("read_file", 0, "[]")]),
    (1, [("x", 0, "done"), ("bash", 8_000, "ok")]),
    (
        9,
        [
            ("read_file", 2_000, _X),
            ("bash", 400, "done"),
            ("read_file", 30_000, "done"),
        ],
    ),
    (6, [("bash", 40, "done")]),
    (5, [("read_file", 8_000, "done"), ("x", 400, _X), ("bash", 2_000, "[]")]),
    (0, [("bash", 40, "ok")]),
    (5, [("read_file", 2_000, _X), ("x", 0, "[]"), ("bash", 8_000, "[]")]),
    (5, [("bash", 40, "[]"), ("bash", 2_000, "done"), ("bash", 8_000, "[]")]),
    (4, [("x", 0, "[]"), ("bash", 0, "ok")]),
    (2, [("read_file", 0, _X)]),
    (8, [("read_file", 400, "[]"), ("x", 8_000, "[]")]),
    (4, [("bash", 0, "ok"), ("read_file", 400, "[]"), ("bash", 2_000, _X)]),
    (0, [("x", 30_000, "[]"), ("x", 400, "done"), ("read_file", 8_000, "ok")]),
    (4, [("read_file", 400, "[]"), ("x", 30_000, "ok"), ("bash", 30_000, _X)]),
    (4, [("read_file", 0, _X)]),
    (9, [("x", 8_000, "done")]),
]


def test_results_held_in_place_are_not_counted_as_dropped():
    """``drop_last`` keeps a tool's results between the units a cut drops: what
    compressing them saves is not saved by the cut, so a history that fits once
    compressed is not trimmed (it was, and a grown guard then differed from a
    fresh one)."""
    policy = GuardPolicy(
        context_window=20_000,
        reserve_tokens=1_000,
        compress_batch=3,
        keep_recent_tool_results=2,
        keep_recent_thinking=0,
        trim_step=0.0,
        compress_trigger=0.0,
        stable_prefix=False,
        tool_policies={"bash": {"drop_last": True}},
    )
    history = _parallel_steps(_HELD_STEPS)
    out = ContextGuard(policy, token_counter=COUNTER).prepare(history)
    assert out.report.tokens_after <= out.report.budget
    assert "trim" not in {e.kind for e in out.report.events}
    assert [m.id for m in out.messages] == [m.id for m in history]
    agent = ContextGuard(policy, token_counter=COUNTER)
    for n in range(3, len(history) + 1):
        if n == len(history) or not isinstance(history[n], ToolMessage):
            _same_as_fresh(agent, history[:n])


def _think(text: str, usage: int | None = None, **calls: dict[str, Any]) -> AIMessage:
    """An assistant step with reasoning, ``text`` and ``calls`` (by id)."""
    return _step(text, usage, blocks=[THINKING], **calls)


def _step(
    text: str,
    usage: int | None = None,
    blocks: list[Any] | None = None,
    **calls: dict[str, Any],
) -> AIMessage:
    usage_metadata = None
    if usage is not None:
        usage_metadata = {
            "input_tokens": usage,
            "output_tokens": 50,
            "total_tokens": usage + 50,
        }
    return AIMessage(
        [*(blocks or []), {"type": "text", "text": text}],
        tool_calls=[{"id": i, **c} for i, c in calls.items()],
        usage_metadata=usage_metadata,
    )


def _bash(cmd: str) -> dict[str, Any]:
    return {"name": "bash", "args": {"cmd": cmd}}


def _write(cmd: str, words: int, seed: int) -> dict[str, Any]:
    return {"name": "write", "args": {"cmd": cmd, "content": filler(seed, words)}}


def test_a_step_after_a_held_pair_lets_the_step_before_it_go_as_a_fresh_guard_does():
    """The latest turn: a step whose calls are not answered yet, then a held
    ``drop_last`` pair whose tiny result settled a size, then a new step. The new
    step makes the first one droppable, and the settled size could have been met
    by dropping it: a grown guard planned its cut again, as a fresh one does (it
    kept the old cut and sent a prompt a fresh guard would not)."""
    policy = GuardPolicy(
        context_window=20_000,
        reserve_tokens=1_000,
        compress_batch=8,
        keep_recent_thinking=0,
        stable_prefix=False,
        tool_policies={
            "mcp__*": {"never_compress": True},
            "b*": {"supersede_key": "cmd"},
            "*": {"drop_last": True},
        },
    )
    history: list[BaseMessage] = [
        SystemMessage(filler(0, 119)),
        SystemMessage(filler(1, 111)),
        _step(filler(2, 56)),
        _think(filler(2, 5), 1_994, w1=_write("make test", 900, 2)),
        result("w1", filler(2, 800)),
        _think(
            filler(3, 50),
            325,
            w2=_write("w2", 5, 3),
            b2=_bash("b2"),
            b3=_bash("b3"),
        ),
        result("w2", filler(3, 800), name="write"),
        result("b2", filler(4, 6_000), name="bash"),
        HumanMessage(filler(7, 144)),
        _step(
            filler(7, 34),
            13_718,
            w4=_write("make test", 900, 7),
            b5=_bash("b5"),
            b6=_bash("make test"),
        ),
        result("w4", filler(7, 800)),
        result("b5", filler(8, 800), name="bash"),
        result("b6", filler(9, 800)),
        _step(
            filler(10, 25), b7=_bash("make test"), b8=_bash("b8"), b9=_bash("cat a.py")
        ),
        _think(
            filler(13, 50),
            27_636,
            w10=_write("w10", 900, 13),
            b11=_bash("b11"),
            w12=_write("cat a.py", 900, 13),
        ),
        result("w10", filler(13, 800)),
        result("b11", filler(14, 6_000), name="bash"),
        result("w12", filler(15, 1)),
        _step(filler(16, 21), b13=_bash("b13"), b14=_bash("b14"), b15=_bash("b15")),
    ]
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in range(len(history) - 4, len(history) + 1):
        _same_as_fresh(guard, history[:n])
    trims = [e for e in guard.prepare(history).report.events if e.kind == "trim"]
    assert trims, "the history must be trimmed for the cut to matter"
