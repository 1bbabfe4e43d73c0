import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_guard import ContextGuard, repair_tool_pairs, sanitize_messages
from langchain_context_guard.engine.passes._sanitize import INVALID_CALL_NOTE
from tests.engine._support import ai, call, result, snapshot


def _ids(message):
    return [c["id"] for c in message.tool_calls]


def test_clean_history_is_returned_as_is():
    history = [SystemMessage("s"), HumanMessage("q"), ai(call("a")), result("a")]
    assert sanitize_messages(history) is history


def test_blank_id_invalid_name_and_non_dict_args_are_dropped():
    message = AIMessage(
        "text",
        tool_calls=[
            call("ok"),
            {"id": "  ", "name": "bash", "args": {}},
            {"id": "n1", "name": "bad name!", "args": {}},
            {"id": "n2", "name": "", "args": {}},
            {"id": "dup", "name": "bash", "args": {}},
            {"id": "dup", "name": "bash", "args": {}},
        ],
    )
    message = message.model_copy()
    message.tool_calls.append(
        {"id": "n3", "name": "bash", "args": "not-a-dict", "type": "tool_call"}
    )  # type: ignore[typeddict-item]
    before = snapshot([message])
    out = sanitize_messages([message])
    assert snapshot([message]) == before
    assert _ids(out[0]) == ["ok", "dup"]


def test_invalid_tool_calls_become_a_note_of_their_name_and_error():
    message = AIMessage(
        "t",
        invalid_tool_calls=[
            {
                "id": "x",
                "name": "f",
                "args": "{oops",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )
    out = sanitize_messages([HumanMessage("q"), message])
    assert out[1].invalid_tool_calls == []
    note = INVALID_CALL_NOTE.format(name="f", why="bad json")
    assert out[1].content == f"t\n\n{note}"
    assert message.content == "t"


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (None, "its arguments were malformed or truncated"),
        ("Expecting ',' delimiter: col 9.\n{bad", "Expecting ',' delimiter: col 9"),
        ("x" * 400, "x" * 157 + "..."),
    ],
    ids=["no-error", "first-line", "long"],
)
def test_a_message_of_only_invalid_calls_is_kept_as_their_note(
    error: str | None, why: str
) -> None:
    invalid = {"id": "x", "name": "read_file", "args": "{", "error": error}
    message = AIMessage(
        [], invalid_tool_calls=[{**invalid, "type": "invalid_tool_call"}]
    )
    out = sanitize_messages([HumanMessage("q"), message])
    note = INVALID_CALL_NOTE.format(name="read_file", why=why)
    assert out[1].content == [{"type": "text", "text": note}]


def test_message_left_empty_is_dropped():
    message = AIMessage("", tool_calls=[{"id": "", "name": "bash", "args": {}}])
    out = sanitize_messages([HumanMessage("q"), message])
    assert out == [HumanMessage("q")]


def test_blank_tool_call_id_result_is_dropped():
    out = sanitize_messages([HumanMessage("q"), ToolMessage("x", tool_call_id=" ")])
    assert len(out) == 1


def test_empty_messages_are_dropped():
    out = sanitize_messages(
        [SystemMessage(""), HumanMessage("  "), HumanMessage("q"), AIMessage([])]
    )
    assert [m.content for m in out] == ["q"]


def test_raw_additional_kwargs_tool_calls_are_cleaned_too():
    raw = [
        {
            "id": "ok",
            "type": "function",
            "function": {"name": "bash", "arguments": "{}"},
        },
        {
            "id": "n1",
            "type": "function",
            "function": {"name": "bad name", "arguments": "{}"},
        },
        {"type": "function", "function": {"name": "bash", "arguments": "{}"}},
    ]
    message = AIMessage(
        "",
        tool_calls=[call("ok"), {"id": "n1", "name": "bad name", "args": {}}],
        additional_kwargs={"tool_calls": raw},
    )
    out = sanitize_messages([message])
    assert [c.get("id") for c in out[0].additional_kwargs["tool_calls"]] == ["ok"]
    assert _ids(out[0]) == ["ok"]


def test_anthropic_tool_use_blocks_are_cleaned_too():
    content = [
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "ok", "name": "bash", "input": {}},
        {"type": "tool_use", "id": "n1", "name": "bad name", "input": {}},
        {"type": "tool_use", "id": "", "name": "bash", "input": {}},
    ]
    message = AIMessage(
        content, tool_calls=[call("ok"), {"id": "n1", "name": "bad name", "args": {}}]
    )
    out = sanitize_messages([message])
    assert [b.get("id") for b in out[0].content if b["type"] == "tool_use"] == ["ok"]
    assert out[0].content[0] == content[0]


def test_idempotent():
    history = [
        AIMessage("", tool_calls=[call("a"), {"id": "", "name": "x", "args": {}}]),
        ToolMessage("", tool_call_id=""),
    ]
    once = sanitize_messages(history)
    assert sanitize_messages(once) is once


def _duplicated() -> dict[str, AIMessage]:
    use = {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}}
    raw = {"id": "c1", "type": "function", "function": {"name": "bash"}}
    raw["function"]["arguments"] = '{"cmd": "ls"}'
    return {
        "blocks": AIMessage(
            [{"type": "text", "text": "run"}, use, dict(use)], tool_calls=[call("c1")]
        ),
        "calls": AIMessage(
            "run",
            tool_calls=[call("c1"), call("c1")],
            additional_kwargs={"tool_calls": [raw, dict(raw)]},
        ),
    }


@pytest.mark.parametrize("kind", ["blocks", "calls"])
def test_a_repeated_call_id_in_one_message_keeps_only_the_first(kind):
    message = _duplicated()[kind]
    before = snapshot([message])
    history = [HumanMessage("hi"), message, result("c1"), HumanMessage("next")]
    for out in (
        sanitize_messages(history),
        repair_tool_pairs(sanitize_messages(history)),
        ContextGuard().prepare(history).messages,
    ):
        [cleaned] = [m for m in out if isinstance(m, AIMessage)]
        uses = [b for b in cleaned.content if isinstance(b, dict)]
        assert [b["id"] for b in uses if b["type"] == "tool_use"] in ([], ["c1"])
        assert [c["id"] for c in cleaned.tool_calls] == ["c1"]
        raw = cleaned.additional_kwargs.get("tool_calls", [])
        assert [c["id"] for c in raw] in ([], ["c1"])
        assert cleaned.text == "run"
    assert snapshot([message]) == before  # the caller's message is untouched
    once = sanitize_messages(history)
    assert sanitize_messages(once) is once
