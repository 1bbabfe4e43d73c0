import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_guard import ContextGuard, GuardPolicy, InvalidInputError
from tests.engine._support import ai, assert_paired, call, result, snapshot

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
TEN_MB = 10 * 1024 * 1024


def _prepare(messages):
    return ContextGuard(POLICY).prepare(messages)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "hello",
        b"hello",
        {"role": "user", "content": "hi"},
        ("user", "hi"),
        HumanMessage("hi"),
        42,
    ],
    ids=["none", "str", "bytes", "dict", "pair", "message", "int"],
)
def test_not_a_list_of_messages_is_an_invalid_input_error(value):
    with pytest.raises(InvalidInputError, match="Expected a sequence of messages"):
        _prepare(value)


@pytest.mark.parametrize(
    ("item", "text"),
    [
        ({"role": "wizard", "content": "x"}, "Message 1 cannot be read"),
        (None, "Message 1 is None"),
        ({"content": "no role"}, "Message 1 cannot be read"),
        (3.5, "Message 1 cannot be read"),
    ],
    ids=["unknown-role", "none-item", "no-role", "number"],
)
def test_unreadable_message_names_its_index(item, text):
    with pytest.raises(InvalidInputError, match=text) as info:
        _prepare([HumanMessage("ok"), item])
    assert info.value.index == 1
    assert "Fix:" in str(info.value)


def test_openai_dicts_including_assistant_content_none_with_tool_calls():
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "done"},
    ]
    out = _prepare(history).messages
    assert out[2].tool_calls[0]["args"] == {"path": "."}
    assert_paired(out)


def test_none_and_empty_content_are_handled():
    history = [
        {"role": "user", "content": None},
        HumanMessage(""),
        HumanMessage("real question"),
        AIMessage(""),
        AIMessage([]),
        ai(call("c1")),
        result("c1", ""),
    ]
    out = _prepare(history).messages
    assert [type(m) for m in out] == [HumanMessage, AIMessage, ToolMessage]
    assert out[2].content == "(no output)"


def test_tuples_in_the_list():
    out = _prepare([("system", "s"), ("human", "hi"), ("ai", "hello")]).messages
    assert [m.type for m in out] == ["system", "human", "ai"]


def test_a_10_mb_tool_result_is_truncated():
    history = [
        SystemMessage("s"),
        HumanMessage("q"),
        ai(call("c1")),
        result("c1", "x" * TEN_MB),
    ]
    out = _prepare(history)
    assert out.report.tokens_after <= out.report.budget
    assert len(out.messages[-1].content) < 60_000
    assert len(history[-1].content) == TEN_MB


def test_a_10_mb_user_message_is_a_clear_budget_error():
    from langchain_context_guard import BudgetExceededError

    with pytest.raises(BudgetExceededError) as info:
        _prepare([SystemMessage("s"), HumanMessage("word " * (TEN_MB // 5))])
    assert info.value.over_by > 1_000_000


def test_a_10_mb_user_message_fits_when_max_chars_per_message_is_set():
    policy = GuardPolicy(
        context_window=32_000, reserve_tokens=4_000, max_chars_per_message=20_000
    )
    out = ContextGuard(policy).prepare([HumanMessage("y" * TEN_MB)])
    assert len(out.messages[0].content) <= 20_000


@pytest.mark.parametrize(
    "text",
    [
        "👍🏽👨‍👩‍👧‍👦 emoji",
        "e\u0301\u0302 combining",
        "lone \ud800 surrogate \udfff",
        "\x00 nul \u200b zwsp",
        "日本語のテキスト" * 500,
    ],
    ids=["emoji", "combining", "lone-surrogates", "control", "cjk"],
)
def test_odd_unicode_does_not_crash(text):
    history = [HumanMessage(text), ai(call("c1")), result("c1", text * 20)]
    before = snapshot(history)
    out = _prepare(history)
    assert snapshot(history) == before
    assert out.report.tokens_after <= out.report.budget
    assert ContextGuard(POLICY).count_tokens(history) > 0


def test_unknown_content_blocks_are_counted_not_fatal():
    message = HumanMessage(
        [
            {"type": "mystery", "payload": {"a": 1}},
            "plain string block",
            {"type": "text"},
        ]
    )
    out = _prepare([message])
    # Kept, except the blank text block providers reject (hygiene drops it).
    assert [m.content for m in out.messages] == [message.content[:2]]
    assert out.report.tokens_before > 3


def test_a_generator_is_accepted():
    out = _prepare(m for m in [HumanMessage("a"), AIMessage("b")])
    assert len(out.messages) == 2


@pytest.mark.parametrize("stable_prefix", [True, False], ids=["stable", "plain"])
@pytest.mark.parametrize(
    "history",
    [[HumanMessage("")], [SystemMessage("s"), HumanMessage("  ")], [AIMessage("")]],
    ids=["empty-user", "blank-user", "empty-assistant"],
)
def test_a_history_that_sanitises_to_nothing_gives_nothing_every_time(
    history, stable_prefix
):
    guard = ContextGuard(GuardPolicy(stable_prefix=stable_prefix))
    first = guard.prepare(history).messages
    assert guard.prepare(history).messages == first
    assert guard.prepare([*history, AIMessage(" ")]).messages == first
    assert all(not isinstance(m, (HumanMessage, AIMessage)) for m in first)


def test_openai_call_with_unreadable_arguments_is_dropped_with_an_event():
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": "{not json"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "lost"},
        {"role": "tool", "tool_call_id": "c2", "content": "files"},
    ]
    result = _prepare(history)
    calls = [c["id"] for m in result.messages for c in getattr(m, "tool_calls", [])]
    assert calls == ["c2"]
    assert [m.content for m in result.messages if isinstance(m, ToolMessage)] == [
        "files"
    ]
    kinds = {e.kind for e in result.report.events}
    assert {"sanitize", "repair"} <= kinds
    assert_paired(result.messages)


@pytest.mark.parametrize(
    "calls",
    [["x"], [None], [{"id": "c1", "function": {"name": "ls"}}, 3], "x", {"id": "c"}],
    ids=["str-call", "none-call", "int-after-dict", "str-field", "dict-field"],
)
def test_openai_tool_calls_that_are_not_dicts_name_the_field(calls):
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]
    with pytest.raises(InvalidInputError, match="tool_calls") as info:
        _prepare(history)
    assert info.value.index == 1
    assert "Fix:" in str(info.value)
    assert "dict" in info.value.hint
