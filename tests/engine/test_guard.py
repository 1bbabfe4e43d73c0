import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import (
    MARKER_KEY,
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    PrepareResult,
    TiktokenCounter,
)
from tests.engine._support import (
    agent_history,
    ai,
    assert_paired,
    call,
    chat_history,
    result,
    snapshot,
)

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
TIGHT = GuardPolicy(
    context_window=32_000, reserve_tokens=4_000, keep_recent_tool_results=20
)
# Every call fitted to the budget afresh, no digest: for tests of what fits.
ORDER_FREE = TIGHT.model_copy(update={"stable_prefix": False, "digest": False})


def test_public_contract():
    guard = ContextGuard(GuardPolicy(context_window=32_000, reserve_tokens=4_000))
    history = chat_history(3)
    out = guard.prepare(history)
    assert isinstance(out, PrepareResult)
    assert out.messages == history
    assert out.report.budget == 28_000 and out.report.context_window == 32_000
    assert out.report.window_source == "override"
    assert out.report.counter == "bpe-openai:cl100k_base"
    assert guard.count_tokens(history) == out.report.tokens_before


def test_only_system_and_one_user_message_pass_through():
    history = [SystemMessage("sys"), HumanMessage("hello")]
    out = ContextGuard(POLICY).prepare(history)
    assert out.messages == history and all(
        a is b for a, b in zip(out.messages, history, strict=True)
    )


def test_long_agent_run_fits_the_budget_with_valid_pairing():
    history = agent_history(150, result_chars=6_000)
    before = snapshot(history)
    out = ContextGuard(TIGHT).prepare(history)
    assert snapshot(history) == before
    assert out.report.tokens_after <= out.report.budget < out.report.tokens_before
    assert_paired(out.messages)
    assert out.messages[:2] == history[:2]
    assert out.messages[-2:] == history[-2:]
    assert [e.kind for e in out.report.events] == ["compress", "trim"]  # no digest
    assert guard_count(out.messages) == out.report.tokens_after


def guard_count(messages):
    return ContextGuard(TIGHT).count_tokens(messages)


def test_one_message_alone_over_budget_is_a_clear_error():
    history = [SystemMessage("s"), HumanMessage("word " * 40_000)]
    with pytest.raises(BudgetExceededError) as info:
        ContextGuard(POLICY).prepare(history)
    assert info.value.budget == 28_000 and info.value.window == 32_000
    assert info.value.tokens > 40_000


def test_tool_schemas_count_inside_the_budget():
    tools = [
        {
            "type": "function",
            "function": {"name": f"t{i}", "description": "d " * 400, "parameters": {}},
        }
        for i in range(30)
    ]
    guard = ContextGuard(ORDER_FREE)
    history = agent_history(40, result_chars=6_000)
    plain = guard.prepare(history)
    with_tools = guard.prepare(history, tools=tools)
    assert with_tools.report.tokens_after <= with_tools.report.budget
    assert len(with_tools.messages) < len(plain.messages)


def test_disabled_guard_changes_nothing():
    history = agent_history(150, result_chars=3_000)
    out = ContextGuard(GuardPolicy(enabled=False, context_window=32_000)).prepare(
        history
    )
    assert out.messages == history and out.report.events == ()


def test_idempotent_and_deterministic():
    history = [*agent_history(100, result_chars=6000), HumanMessage("next")]
    first = ContextGuard(TIGHT).prepare(history).messages
    second = ContextGuard(TIGHT).prepare(history).messages
    assert snapshot(first) == snapshot(second)
    assert len(first) < len(history)
    again = ContextGuard(TIGHT).prepare(first)
    assert again.messages == first and again.report.events == ()


def test_growing_history_keeps_old_output_byte_identical_between_cut_moves():
    guard = ContextGuard(TIGHT)
    full = agent_history(200, result_chars=4_000)
    prev = None
    stable = 0
    for n in range(100, 201):
        out = guard.prepare(full[: 2 + 2 * n]).messages
        if prev is not None and out[2].id == prev[2].id:
            k = len(prev) - 6  # everything but the newest (uncompressed) results
            stable += snapshot(out[:k]) == snapshot(prev[:k])
        prev = out
    assert stable >= 60


def test_warm_call_encodes_about_one_new_message():
    counter = TiktokenCounter()
    guard = ContextGuard(POLICY, token_counter=counter)
    full = agent_history(120, result_chars=3_000)
    guard.prepare(full[:-1])
    encoded = counter.encoded
    guard.prepare(full)
    assert counter.encoded - encoded <= 3  # the new result, plus any rewrite


def test_anchored_history_reports_provider_figures():
    history = agent_history(5)
    counter = TiktokenCounter()
    prefix = sum(counter.count_message(m) for m in history[:-2])
    own = counter.count_message(history[-2])
    history[-2] = history[-2].model_copy(
        update={
            "usage_metadata": {
                "input_tokens": prefix + 50,
                "output_tokens": own,
                "total_tokens": prefix + 50 + own,
            }
        }
    )
    report = ContextGuard(POLICY).prepare(history).report
    assert report.tokens_before > prefix + own + 50


def test_prepare_accepts_openai_dicts_and_tuples():
    history = [
        {"role": "system", "content": "s"},
        ("user", "hi"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    out = ContextGuard(POLICY).prepare(history).messages
    assert [type(m) for m in out] == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
    ]


def test_report_is_json_ready():
    out = ContextGuard(POLICY).prepare(agent_history(150, result_chars=3_000))
    assert json.loads(json.dumps(out.report.to_dict()))["budget"] == 28_000


def test_model_argument_selects_the_window():
    class Model:
        def __init__(self):
            self.profile = {"max_input_tokens": 64_000}

    out = ContextGuard(GuardPolicy(reserve_tokens=4_000)).prepare(
        [HumanMessage("x")], model=Model()
    )
    assert (
        out.report.context_window == 64_000
        and out.report.window_source == "model_profile"
    )


def test_repair_runs_after_trim_so_no_orphans_remain():
    history = [
        SystemMessage("s"),
        HumanMessage("task"),
        result("lost", "x", id="orphan"),
    ]
    history += agent_history(100, result_chars=6_000)[2:]
    history.append(ai(call("open")))
    out = ContextGuard(TIGHT).prepare(history).messages
    assert_paired(out)
    assert isinstance(out[-1], ToolMessage) and out[-1].status == "error"


def test_usage_of_a_prompt_the_guard_sent_calibrates_its_counts():
    """A live agent's reply reports the provider's count of the pruned prompt."""
    exact = ORDER_FREE.model_copy(update={"trim_step": 0.0})  # cuts follow the count
    guard = ContextGuard(exact)
    full = agent_history(150, result_chars=6_000)
    k = len(full) - 2  # the last assistant message
    sent = guard.prepare(full[:k]).messages
    ours = sum(guard.counter.count_message(m) for m in sent)
    usage = {"input_tokens": int(ours * 1.25), "output_tokens": 10}
    usage["total_tokens"] = usage["input_tokens"] + 10
    reply = full[k].model_copy(update={"usage_metadata": usage})
    history = [*full[:k], reply, full[k + 1]]

    def raw(messages):
        return sum(guard.counter.count_message(m) for m in messages)

    calibrated = guard.prepare(history)
    assert calibrated.report.tokens_after >= 1.24 * raw(calibrated.messages)
    assert calibrated.report.tokens_after <= calibrated.report.budget
    fresh = ContextGuard(exact).prepare(history)  # knows nothing of what was sent
    assert fresh.report.tokens_after < 1.05 * raw(fresh.messages) + 10
    assert len(calibrated.messages) < len(fresh.messages)


def test_interpreter_shutdown_is_silent(tmp_path):
    """Caches hold weak references without callbacks: nothing runs at exit."""
    script = tmp_path / "run.py"
    script.write_text(
        "from tests.engine._support import agent_history\n"
        "from langchain_context_guard import ContextGuard, GuardPolicy\n"
        "guard = ContextGuard(GuardPolicy(context_window=16_000))\n"
        "history = agent_history(60, result_chars=3_000)\n"
        "KEEP = [guard.prepare(history[:n]) for n in range(40, 122, 9)]\n"
        "del history\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr
    assert "Traceback" not in done.stderr


def _live(history, guard, ratio):
    """``history`` as a live agent records it: each reply carries the provider's
    count (``ratio`` x ours) of the prompt the guard sent before it."""
    lived = []
    for message in history:
        if isinstance(message, AIMessage):
            sent = guard.prepare(lived).messages
            ours = sum(map(guard.counter.count_message, sent))
            usage = {"input_tokens": int(ours * ratio), "output_tokens": 10}
            usage["total_tokens"] = usage["input_tokens"] + 10
            message = message.model_copy(update={"usage_metadata": usage})
        lived.append(message)
    return lived


def test_usage_of_a_pruned_prompt_never_anchors_the_full_history():
    guard = ContextGuard(POLICY)
    lived = _live(agent_history(80, result_chars=3_000), guard, 1.1)
    raw = sum(map(guard.counter.count_message, lived))
    # The last reply reports a pruned prompt (well under the history); the guard
    # knows it sent that prompt pruned, so it estimates the history instead.
    assert guard.count_tokens(lived) >= raw * 1.09
    out = guard.prepare(lived).report
    assert out.tokens_before >= raw * 1.09 and out.tokens_after <= out.budget


def test_a_history_without_its_own_calibration_carries_the_last_ratio():
    guard = ContextGuard(POLICY)
    _live(agent_history(30, result_chars=2_000), guard, 1.2)
    other = agent_history(40, result_chars=2_000)  # no usage at all
    raw = sum(map(guard.counter.count_message, other))
    assert guard.count_tokens(other) >= raw * 1.19
    assert ContextGuard(POLICY).count_tokens(other) < raw * 1.01


@pytest.mark.parametrize(
    ("margins", "usage"),
    [((0.0, 0.0), False), ((0.0, 0.1), False), ((0.03, 0.1), True)],
    ids=["no-margin", "uncalibrated-10pc", "calibrated-3pc"],
)
def test_decisions_leave_the_safety_margin_reports_stay_honest(margins, usage):
    policy = ORDER_FREE.model_copy(
        update={
            "trim_step": 0.0,
            "safety_margin": margins[0],
            "uncalibrated_margin": margins[1],
        }
    )
    guard = ContextGuard(policy)
    history = agent_history(120, result_chars=3_000)
    if usage:
        history = _live(history, guard, 1.0)
    report = guard.prepare(history).report
    margin = margins[1] if not usage else margins[0]
    honest = guard.count_tokens(guard.prepare(history).messages)
    assert report.tokens_after == honest
    assert report.tokens_after * (1 + margin) <= report.budget + 8
    assert report.tokens_after * (1 + margin) > report.budget * 0.9


def test_usage_of_the_whole_history_is_told_from_usage_of_what_was_sent():
    """An app that sends the full history anyway: replies count the full prefix."""
    guard = ContextGuard(POLICY)
    lived = []
    for message in agent_history(80, result_chars=3_000):
        if isinstance(message, AIMessage):
            guard.prepare(lived)  # prepared, then not what was sent
            whole = sum(map(guard.counter.count_message, lived)) + 3
            usage = {"input_tokens": int(whole * 1.1), "output_tokens": 10}
            usage["total_tokens"] = usage["input_tokens"] + 10
            message = message.model_copy(update={"usage_metadata": usage})
        lived.append(message)
    raw = sum(map(guard.counter.count_message, lived))
    assert raw * 1.09 <= guard.count_tokens(lived) <= raw * 1.11


def test_an_assistant_message_before_the_only_user_message_can_be_dropped():
    manual = AIMessage("manual page text " * 16_000, id="manual")  # ~50k tokens
    history = [SystemMessage("s"), manual, HumanMessage("How do I reset it?")]
    result = ContextGuard(GuardPolicy(context_window=32_000)).prepare(history)
    assert not any(m is manual for m in result.messages)
    assert result.messages[-1] is history[-1]
    assert result.report.tokens_after <= result.report.budget


def test_a_history_opening_with_the_assistant_gets_a_neutral_user_turn_first():
    history = [
        SystemMessage("s"),
        AIMessage("Hello, how can I help?"),
        HumanMessage("q"),
    ]
    policy = GuardPolicy(context_window=32_000, uncalibrated_margin=0)
    result = ContextGuard(policy).prepare(history)
    first = result.messages[1]
    # Anthropic and Gemini refuse a conversation that opens with the assistant;
    # nothing was removed, so the placeholder does not say so.
    assert isinstance(first, HumanMessage) and "removed" not in first.text
    assert result.messages[2:] == history[1:]
    assert result.report.tokens_after <= result.report.budget
    assert ContextGuard(policy).prepare(result.messages).messages == result.messages


def _digest_first(words: int) -> list[BaseMessage]:
    """A prepared history re-sent: a digest first, then a long step, then a question."""
    digest = HumanMessage(
        "notes " * 3_000, id="d", additional_kwargs={MARKER_KEY: {"kind": "digest"}}
    )
    step = AIMessage("answer " * words, id="a")
    return [SystemMessage("s", id="sys"), digest, step, HumanMessage("q", id="q")]


@pytest.mark.parametrize("words", range(13_950, 13_990, 3))
def test_the_placeholder_put_first_is_budgeted(words):
    policy = GuardPolicy(
        context_window=16_000,
        reserve_tokens=2_000,
        safety_margin=0,
        uncalibrated_margin=0,
        digest=False,
        stable_prefix=False,
    )
    result = ContextGuard(policy).prepare(_digest_first(words))
    assert result.report.tokens_after <= result.report.budget
    again = ContextGuard(policy).prepare(result.messages)
    assert snapshot(again.messages) == snapshot(result.messages)


def test_a_cut_forced_by_what_hygiene_adds_leaves_the_digest_its_room():
    """Found by the adversarial properties: the plan kept all, the empty result's
    placeholder text did not fit, the cut moved on without the digest's room."""
    big = "x = compute(y)  # 200k\n" * 8_700
    calls = [call("c0", n=0), call("c1", n=1)]
    history = [
        ToolMessage("alpha", tool_call_id="c1"),
        HumanMessage(big, id="m1"),
        AIMessage("alpha", id="m2"),
        AIMessage("", tool_calls=calls, id="m3"),
        ToolMessage("", tool_call_id="c0", id="r4"),
    ]
    for window in range(95_740, 95_760):
        policy = GuardPolicy(
            context_window=window,
            reserve_tokens=0,
            hard_min_tokens=0,
            warn_below_tokens=0,
            safety_margin=0,
            uncalibrated_margin=0,
            keep_first_user=False,
            keep_recent_tool_results=0,
            compress_batch=1,
            trim_step=0,
            max_tool_result_chars=5_000,
            stable_prefix=False,
        )
        try:
            report = ContextGuard(policy).prepare(history).report
        except BudgetExceededError:
            continue
        assert report.tokens_after <= report.budget, window
