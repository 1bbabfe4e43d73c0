"""The stand-in server refuses what the providers refuse, as they do.

"0 rejections" in the scenario tests means something only if the server would
have rejected a bad request: these tests send it over-long prompts and broken
tool pairings, through the real clients and as raw bodies, and check the status,
the error body, and that the library classifies the overflow as the providers'.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_guard import classify_overflow

from ._server import ProviderServer
from ._support import PROVIDERS, QUIET_RETIREMENT, TOOLS, chat_model, run_tools

pytestmark = QUIET_RETIREMENT

MakeServer = Callable[..., ProviderServer]


def _post(
    server: ProviderServer, provider: str, body: dict[str, Any]
) -> httpx.Response:
    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    return httpx.post(server.url + path, json=body, timeout=5)


def test_an_over_long_openai_prompt_gets_openais_error(make_server: MakeServer) -> None:
    server = make_server()
    with pytest.raises(Exception) as caught:
        chat_model("openai", server).invoke([HumanMessage("word " * 20_000)])
    (refused,) = server.rejections
    assert (refused.status, refused.verdict) == (400, "too_long")
    body = {"model": "gpt-4o-mini", "messages": refused.body["messages"]}
    answer = _post(server, "openai", body)
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "message": "This model's maximum context length is 16000 tokens. "
            f"However, your messages resulted in {refused.tokens} tokens. "
            "Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    info = classify_overflow(caught.value)
    assert info is not None
    assert (info.provider_hint, info.limit_tokens) == ("openai", 16_000)
    assert info.requested_tokens == refused.tokens


def test_an_over_long_anthropic_prompt_gets_anthropics_error(
    make_server: MakeServer,
) -> None:
    server = make_server()
    with pytest.raises(Exception) as caught:
        chat_model("anthropic", server).invoke([HumanMessage("word " * 20_000)])
    (refused,) = server.rejections
    assert (refused.status, refused.verdict) == (400, "too_long")
    answer = _post(server, "anthropic", refused.body)
    assert answer.status_code == 400
    assert answer.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {refused.tokens} tokens > 16000 maximum",
        },
    }
    info = classify_overflow(caught.value)
    assert info is not None
    assert (info.provider_hint, info.limit_tokens) == ("anthropic", 16_000)
    assert info.requested_tokens == refused.tokens


def _call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "grep", "arguments": "{}"},
    }


OPENAI_BROKEN = {
    "orphan tool result": (
        [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ],
        "messages with role 'tool' must be a response to a preceeding message",
    ),
    "result for another call": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
            {"role": "tool", "tool_call_id": "c2", "content": "x"},
        ],
        "messages with role 'tool' must be a response to a preceeding message",
    ),
    "unanswered call": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
            {"role": "user", "content": "go on"},
        ],
        "did not have response messages: c1",
    ),
}


@pytest.mark.parametrize("case", OPENAI_BROKEN, ids=list(OPENAI_BROKEN))
def test_openai_tool_pairing_is_enforced(make_server: MakeServer, case: str) -> None:
    server = make_server()
    messages, expected = OPENAI_BROKEN[case]
    answer = _post(server, "openai", {"model": "gpt-4o-mini", "messages": messages})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert expected in error["message"]
    assert [e.verdict for e in server.exchanges] == ["invalid"]


def _use(use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "grep", "input": {}}


def _result(use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": "x"}


ANTHROPIC_BROKEN = {
    "assistant first": (
        [{"role": "assistant", "content": "hi"}],
        'first message must use the "user" role',
    ),
    "two user turns": (
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        "roles must alternate",
    ),
    "orphan tool result": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [_result("t1")]},
        ],
        "unexpected `tool_use_id` found in `tool_result` blocks: t1",
    ),
    "unanswered tool use": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": "go on"},
        ],
        "`tool_use` ids were found without `tool_result` blocks immediately after",
    ),
    "duplicate tool use id": (
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": [_result("t1")]},
            {"role": "assistant", "content": [_use("t1")]},
            {"role": "user", "content": [_result("t1")]},
        ],
        "`tool_use` ids must be unique",
    ),
}


@pytest.mark.parametrize("case", ANTHROPIC_BROKEN, ids=list(ANTHROPIC_BROKEN))
def test_anthropic_turn_rules_are_enforced(make_server: MakeServer, case: str) -> None:
    server = make_server()
    messages, expected = ANTHROPIC_BROKEN[case]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
    answer = _post(server, "anthropic", body)
    assert answer.status_code == 400
    assert answer.json()["type"] == "error"
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert expected in error["message"]
    assert [e.verdict for e in server.exchanges] == ["invalid"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_client_gets_the_pairing_error(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server()
    orphan = [HumanMessage("hi"), ToolMessage("x", tool_call_id="gone")]
    with pytest.raises(Exception, match="tool") as caught:
        chat_model(provider, server).invoke(orphan)
    assert classify_overflow(caught.value) is None
    assert [e.verdict for e in server.exchanges] == ["invalid"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_replies_follow_the_script_with_real_usage(
    make_server: MakeServer, provider: str, streaming: bool
) -> None:
    server = make_server(tool_steps=1, multiplier=1.25)
    settings: dict[str, Any] = {"streaming": streaming}
    if provider == "openai":
        settings["stream_usage"] = True
    model = chat_model(provider, server, **settings).bind_tools(TOOLS)
    history = [SystemMessage("Be brief."), HumanMessage("Read module 0.")]
    first = model.invoke(history)
    assert isinstance(first, AIMessage)
    assert [c["name"] for c in first.tool_calls] == ["read_file"]
    assert first.tool_calls[0]["args"] == {"path": "src/module_0.py"}
    history += [first, *run_tools(first, ids=False)]
    last = model.invoke(history)
    assert not last.tool_calls
    assert last.text == "Done: the answer after 1 tool calls."
    assert server.rejections == []
    for reply, exchange in zip((first, last), server.accepted, strict=True):
        assert exchange.usage is not None
        usage = reply.usage_metadata
        assert usage is not None
        assert usage["input_tokens"] == exchange.tokens == exchange.usage.prompt
        assert usage["output_tokens"] == exchange.usage.output > 0
        assert exchange.body.get("stream", False) is streaming
    if streaming and provider == "openai":
        assert server.accepted[0].body["stream_options"] == {"include_usage": True}


def test_openai_reports_a_repeated_prefix_as_cached(make_server: MakeServer) -> None:
    server = make_server()
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "notes " * 1_500},
            {"role": "user", "content": "first"},
        ],
    }
    first = _post(server, "openai", body).json()["usage"]
    body["messages"][1]["content"] = "second"
    second = _post(server, "openai", body).json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert 1_024 <= cached < second["prompt_tokens"] and cached % 128 == 0


def test_anthropic_reads_back_a_marked_prefix(make_server: MakeServer) -> None:
    server = make_server()
    mark = {"type": "ephemeral"}
    notes = {"type": "text", "text": "notes " * 1_500, "cache_control": mark}
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [notes]}],
    }
    first = _post(server, "anthropic", body).json()["usage"]
    body["messages"] += [
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "more", "cache_control": mark}],
        },
    ]
    second = _post(server, "anthropic", body).json()["usage"]
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 1_500
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < second["cache_creation_input_tokens"] < 20
    total = sum(second[k] for k in second if k != "output_tokens")
    assert total == server.accepted[1].tokens


def test_no_connection_leaves_the_machine() -> None:
    with pytest.raises(OSError, match="refused"):
        socket.create_connection(("10.255.255.1", 443), timeout=1)


def test_an_unknown_path_is_not_served(make_server: MakeServer) -> None:
    server = make_server()
    answer = httpx.post(server.url + "/v1/assistants", content=json.dumps({}))
    assert answer.status_code == 404
    assert server.exchanges == []
