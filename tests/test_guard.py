import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    PrepareResult,
    TiktokenCounter,
)
from tests._engine_support import (
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


def test_public_contract():
    guard = ContextGuard(GuardPolicy(context_window=32_000, reserve_tokens=4_000))
    history = chat_history(3)
    out = guard.prepare(history)
    assert isinstance(out, PrepareResult)
    assert out.messages == history
    assert out.report.budget == 28_000 and out.report.context_window == 32_000
    assert out.report.window_source == "override"
    assert out.report.counter == "tiktoken:cl100k_base"
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
    assert [e.kind for e in out.report.events] == ["compress", "trim"]
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
    guard = ContextGuard(TIGHT)
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
    guard = ContextGuard(TIGHT)
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
    fresh = ContextGuard(TIGHT).prepare(history)  # knows nothing of what was sent
    assert fresh.report.tokens_after < 1.05 * raw(fresh.messages) + 10
    assert len(calibrated.messages) < len(fresh.messages)
