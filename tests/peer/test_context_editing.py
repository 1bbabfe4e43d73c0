"""LangChain's ``ContextEditingMiddleware`` tests, ported to ``ContextGuardMiddleware``.

Ported from langchain 1.5.2, ``libs/langchain_v1/tests/unit_tests/agents/
middleware/implementations/test_context_editing.py``, with the names kept. Where
LangChain clears an old result to ``placeholder`` we compress it to its first and
last lines with a marker (``compress_batch=1`` and ``compress_min_chars=0`` make
small results compress as LangChain's clear them); the deliberate differences are
strict xfails, listed in docs/langchain.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import ClearToolUsesEdit, ModelRequest
from langchain_core.language_models.fake_chat_models import FakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import BudgetExceededError, ConfigError, GuardPolicy
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.engine._messages import marker

# Old results compress one at a time, however short, within a small window.
SMALL = {
    "context_window": 20_000,
    "reserve_tokens": 1_000,
    "hard_min_tokens": 0,
    "warn_below_tokens": 0,
    "compress_batch": 1,
    "compress_min_chars": 0,
    "compress_min_share": 0.0,
}


def _lines(tag: str, n: int = 40) -> str:
    return "\n".join(f"{tag} line {k}" for k in range(n))


def _make_request(messages: list[BaseMessage]) -> ModelRequest[Any]:
    return ModelRequest(model=FakeChatModel(), messages=list(messages), tools=[])


def _sent(middleware: ContextGuardMiddleware, request: ModelRequest[Any]) -> Any:
    seen: list[ModelRequest[Any]] = []

    def handler(req: ModelRequest[Any]) -> AIMessage:
        seen.append(req)
        return AIMessage("mock response")

    middleware.wrap_model_call(request, handler)
    return seen[0].messages


async def _asent(middleware: ContextGuardMiddleware, request: ModelRequest[Any]) -> Any:
    seen: list[ModelRequest[Any]] = []

    async def handler(req: ModelRequest[Any]) -> AIMessage:
        seen.append(req)
        return AIMessage("mock response")

    await middleware.awrap_model_call(request, handler)
    return seen[0].messages


def _result(sent: list[BaseMessage], call_id: str) -> BaseMessage:
    return next(
        m for m in sent if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    )


def _compressed(message: BaseMessage) -> bool:
    return (marker(message) or {}).get("kind") == "compressed"


def _search_then_calc() -> list[BaseMessage]:
    return [
        AIMessage(
            "", tool_calls=[{"id": "s", "name": "search", "args": {"query": "foo"}}]
        ),
        ToolMessage(_lines("search-results"), tool_call_id="s"),
        AIMessage("", tool_calls=[{"id": "c", "name": "calculator", "args": {"a": 1}}]),
        ToolMessage(_lines("calc"), tool_call_id="c"),
        AIMessage("", tool_calls=[{"id": "n", "name": "note", "args": {}}]),
        ToolMessage("noted", tool_call_id="n"),
    ]


def _three_tool_steps() -> list[BaseMessage]:
    conversation: list[BaseMessage] = []
    for call_id in ("call-a", "call-b", "call-c"):
        conversation.append(
            AIMessage(
                "",
                tool_calls=[
                    {"id": call_id, "name": "tool", "args": {"input": call_id}}
                ],
            )
        )
        conversation.append(ToolMessage(_lines(call_id), tool_call_id=call_id))
    return conversation


def test_no_edit_when_below_trigger() -> None:
    ai_message = AIMessage(
        "", tool_calls=[{"id": "call-1", "name": "search", "args": {}}]
    )
    tool_message = ToolMessage(_lines("result"), tool_call_id="call-1")
    middleware = ContextGuardMiddleware(
        edits=[ClearToolUsesEdit(trigger=5_000, keep=0)], **SMALL
    )
    sent = _sent(middleware, _make_request([ai_message, tool_message]))
    assert sent[-1].content == tool_message.content


def test_trigger_reached_compresses_old_results() -> None:
    middleware = ContextGuardMiddleware(
        edits=[ClearToolUsesEdit(trigger=50, keep=0)], **SMALL
    )
    sent = _sent(middleware, _make_request(_three_tool_steps()))
    assert all(_compressed(m) for m in sent if isinstance(m, ToolMessage))


@pytest.mark.xfail(
    strict=True,
    raises=ConfigError,
    reason="tool call arguments are kept and the compression marker's text is "
    "fixed: clear_tool_inputs=True and a placeholder of its own are refused",
)
def test_clear_tool_outputs_and_inputs() -> None:
    edit = ClearToolUsesEdit(
        trigger=50,
        clear_at_least=10,
        clear_tool_inputs=True,
        keep=0,
        placeholder="[cleared output]",
    )
    ContextGuardMiddleware(edits=[edit], **SMALL)


def test_respects_keep_last_tool_results() -> None:
    middleware = ContextGuardMiddleware(
        edits=[ClearToolUsesEdit(trigger=50, keep=1)], **SMALL
    )
    sent = _sent(middleware, _make_request(_three_tool_steps()))
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert [_compressed(m) for m in results] == [True, True, False]
    assert results[-1].content == _lines("call-c")


def test_exclude_tools_prevents_clearing() -> None:
    middleware = ContextGuardMiddleware(
        edits=[ClearToolUsesEdit(trigger=50, keep=0, exclude_tools=("search",))],
        **SMALL,
    )
    history = _search_then_calc()
    sent = _sent(middleware, _make_request(history))
    assert _result(sent, "s") is history[1]  # the caller's own message, whole
    assert _compressed(_result(sent, "c"))


async def test_no_edit_when_below_trigger_async() -> None:
    tool_message = ToolMessage(_lines("result"), tool_call_id="call-1")
    middleware = ContextGuardMiddleware(
        edits=[ClearToolUsesEdit(trigger=5_000, keep=0)], **SMALL
    )
    request = _make_request(
        [
            AIMessage("", tool_calls=[{"id": "call-1", "name": "search", "args": {}}]),
            tool_message,
        ]
    )
    sent = await _asent(middleware, request)
    assert sent[-1].content == tool_message.content


async def test_respects_keep_last_tool_results_async() -> None:
    middleware = ContextGuardMiddleware(keep=1, trigger=50, **SMALL)
    sent = await _asent(middleware, _make_request(_three_tool_steps()))
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert [_compressed(m) for m in results] == [True, True, False]


async def test_exclude_tools_prevents_clearing_async() -> None:
    middleware = ContextGuardMiddleware(
        keep=0, trigger=50, exclude_tools=["search"], **SMALL
    )
    history = _search_then_calc()
    sent = await _asent(middleware, _make_request(history))
    assert _result(sent, "s") is history[1]
    assert _compressed(_result(sent, "c"))


# --- our mapping of the vocabulary ---------------------------------------------


def test_keywords_map_onto_the_policy() -> None:
    middleware = ContextGuardMiddleware(keep=5, trigger=9_500, **SMALL)
    policy = middleware.guard.policy
    assert policy.keep_recent_tool_results == 5
    assert policy.compress_trigger == pytest.approx(9_500 / middleware.guard.budget())


def test_exclude_tools_results_are_never_truncated() -> None:
    huge = ToolMessage("x" * 60_000, tool_call_id="s", name="search")
    history: list[BaseMessage] = [
        AIMessage("", tool_calls=[{"id": "s", "name": "search", "args": {}}]),
        huge,
    ]
    plain = _sent(
        ContextGuardMiddleware(context_window=128_000), _make_request(history)
    )
    assert plain[-1].content != huge.content
    middleware = ContextGuardMiddleware(
        context_window=128_000, exclude_tools=["search"]
    )
    assert _sent(middleware, _make_request(history))[-1] is huge


@pytest.mark.parametrize("named", [True, False], ids=["named", "by-call"])
@pytest.mark.parametrize("how", ["keyword", "policy"])
def test_an_excluded_result_that_cannot_fit_is_refused_naming_the_tool(
    how: str, named: bool
) -> None:
    """One behaviour, as the middleware's keyword and as the policy's field.

    The newest result is larger than the whole budget: it is never cut, so the
    call is refused, and the error names the tool and the fix. By the policy a
    result is matched by its name; the keyword also finds it by its call.
    """
    huge = ToolMessage("search line\n" * 12_000, tool_call_id="s")
    if named or how == "policy":
        huge = huge.model_copy(update={"name": "search"})
    history: list[BaseMessage] = [
        HumanMessage("find it"),
        AIMessage("", tool_calls=[{"id": "s", "name": "search", "args": {}}]),
        huge,
    ]
    if how == "keyword":
        middleware = ContextGuardMiddleware(exclude_tools=["search"], **SMALL)
    else:
        policy = GuardPolicy(exclude_tools=("search",), **SMALL)  # type: ignore[arg-type]
        middleware = ContextGuardMiddleware(policy)
    with pytest.raises(BudgetExceededError) as raised:
        _sent(middleware, _make_request(history))
    assert raised.value.tool == "search"
    assert "exclude_tools" in raised.value.hint
    assert raised.value.tokens > raised.value.budget


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"clear_at_least": 100}, "clear_at_least"),
        ({"clear_tool_inputs": True}, "clear_tool_inputs"),
        ({"placeholder": "[gone]"}, "placeholder"),
        ({"edits": [ClearToolUsesEdit(), ClearToolUsesEdit()]}, "edits"),
        ({"edits": [ClearToolUsesEdit()], "keep": 2}, "edits"),
        ({"exclude_tools": "search"}, "exclude_tools"),
        ({"keep": True}, "keep"),
        ({"trigger": 10.5}, "trigger"),
    ],
    ids=[
        "clear_at_least",
        "clear_tool_inputs",
        "placeholder",
        "two-edits",
        "edits-and-keywords",
        "str-exclude",
        "bool-keep",
        "float-trigger",
    ],
)
def test_what_cannot_map_is_refused(given: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ContextGuardMiddleware(**given)
    assert caught.value.field == field
    assert caught.value.hint


def test_default_edit_is_accepted() -> None:
    middleware = ContextGuardMiddleware(edits=[ClearToolUsesEdit()], **SMALL)
    assert middleware.guard.policy.keep_recent_tool_results == 3


def test_exclude_tools_with_persist_stores_the_callers_messages() -> None:
    from langgraph.runtime import Runtime

    huge = ToolMessage("x" * 60_000, tool_call_id="s", name="search", id="t1")
    history: list[BaseMessage] = [
        HumanMessage("find it", id="h1"),
        AIMessage("", tool_calls=[{"id": "s", "name": "search", "args": {}}], id="a1"),
        huge,
        AIMessage("found", id="a2"),
    ]
    middleware = ContextGuardMiddleware(
        context_window=128_000, exclude_tools=["search"], persist=True
    )
    update = middleware.before_model({"messages": history}, Runtime())
    assert update is None  # nothing to rewrite: the result is kept whole
    plain = ContextGuardMiddleware(context_window=128_000, persist=True)
    rewritten = plain.before_model({"messages": history}, Runtime())
    assert rewritten is not None
