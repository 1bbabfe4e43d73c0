"""Fakes for the recovery tests: SDK-shaped provider errors and a limited model.

The error texts are the real ones from ``tests/test_overflow.py``, with the figures
filled in from the fake model's hidden limit; the SDK-shaped exceptions are in
``tests/fakes.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.exceptions import ContextOverflowError as NativeOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import is_user, with_marker
from tests.fakes import (
    OPENAI_TPM,
    FakeAPIStatusError,
    FakeClientError,
    ScriptedChatModel,
    tool_history,
)

ErrorFactory = Callable[[int, int], Exception]
"""``(requested_tokens, limit_tokens) -> the provider's error``."""


def _anthropic(req: int, lim: int) -> Exception:
    text = f"prompt is too long: {req} tokens > {lim} maximum"
    return FakeAPIStatusError(
        'Error code: 400 - {"type": "error", "error": {"type": '
        f'"invalid_request_error", "message": "{text}"}}, '
        '"request_id": "req_011CVjxiYzEFcAQC4Fk87zw2"}',
        status_code=400,
        body={"type": "error", "error": {"type": "invalid_request_error"}},
    )


def _openai(req: int, lim: int) -> Exception:
    text = (
        f"This model's maximum context length is {lim} tokens. However, your "
        f"messages resulted in {req} tokens ({req - 500} in the messages, 500 in "
        "the functions). Please reduce the length of the messages or functions."
    )
    body = {
        "error": {
            "message": text,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return FakeAPIStatusError(
        "Bad Request", status_code=400, body=body, code="context_length_exceeded"
    )


def _openai_window(req: int, lim: int) -> Exception:
    return FakeAPIStatusError(
        "Error code: 400 - {'error': {'message': 'Your input exceeds the context "
        "window of this model. Please adjust your input and try again.', 'type': "
        "'invalid_request_error', 'param': 'input', 'code': "
        "'context_length_exceeded'}}",
        status_code=400,
        code="context_length_exceeded",
    )


def _gemini(req: int, lim: int) -> Exception:
    return RuntimeError(
        "400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': 'The input "
        f"token count ({req}) exceeds the maximum number of tokens allowed "
        f"({lim}).', 'status': 'INVALID_ARGUMENT'}}}}"
    )


def _bedrock(req: int, lim: int) -> Exception:
    return FakeClientError(
        "ValidationException",
        "Input is too long for requested model.",
        "Converse",
        400,
    )


def _mistral(req: int, lim: int) -> Exception:
    return RuntimeError(
        'Status 400. Body: {"object":"error","message":"Prompt contains '
        f"{req} tokens and 0 draft tokens, too large for model with {lim} maximum "
        'context length","type":"invalid_request_message_error","param":null,'
        '"code":null}'
    )


def _openrouter(req: int, lim: int) -> Exception:
    return FakeAPIStatusError(
        "Error code: 400 - {'error': {'message': \"This endpoint's maximum "
        f"context length is {lim} tokens. However, you requested about {req} "
        f"tokens ({req} of text input, 0 in the output). Please reduce the length "
        'of either one, or use the "middle-out" transform to compress your '
        "prompt automatically.\", 'code': 400}}",
        status_code=400,
    )


def _llamacpp(req: int, lim: int) -> Exception:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size. try "
            "increasing the context size or enable context shift",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": req,
            "n_ctx": lim,
        }
    }
    return FakeAPIStatusError("Error code: 400", status_code=400, body=body)


def _lmstudio(req: int, lim: int) -> Exception:
    return FakeAPIStatusError(
        f"Error code: 400 - {{'error': 'Trying to keep the first {req} tokens "
        "when context the overflows. However, the model is loaded with context "
        f"length of only {lim} tokens, which is not enough. Try to load the model "
        "with a larger context length, or provide a shorter input'}",
        status_code=400,
    )


def _http_413(req: int, lim: int) -> Exception:
    return FakeAPIStatusError(
        'Error code: 413 - {"type": "error", "error": {"type": '
        '"request_too_large", "message": "Request exceeds the maximum allowed '
        'number of bytes."}}',
        status_code=413,
    )


def _chinese_proxy(req: int, lim: int) -> Exception:
    return RuntimeError(
        "Error code: 400 - {'error': {'message': '上下文过长\uff0c请精简输入后重试 "
        "(request id: 20250101123456789)', 'type': 'new_api_error'}}"
    )


def _native(req: int, lim: int) -> Exception:
    return NativeOverflowError("input exceeds context")


OVERFLOW_ERRORS: dict[str, ErrorFactory] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-window": _openai_window,
    "gemini": _gemini,
    "bedrock": _bedrock,
    "mistral": _mistral,
    "openrouter": _openrouter,
    "llama.cpp": _llamacpp,
    "lmstudio": _lmstudio,
    "http-413": _http_413,
    "chinese-proxy": _chinese_proxy,
    "langchain-native": _native,
}
"""Each provider's real overflow error, by a readable id."""
STATES_LIMIT = frozenset(
    {"anthropic", "openai", "gemini", "mistral", "openrouter", "llama.cpp", "lmstudio"}
)
"""The providers whose error text states the limit."""


def not_overflow_errors() -> dict[str, Exception]:
    """Rate-limit, billing and auth errors that must propagate untouched."""
    return {
        "openai-tpm": FakeAPIStatusError(
            OPENAI_TPM, status_code=429, code="rate_limit_exceeded"
        ),
        "anthropic-rate-limit": FakeAPIStatusError(
            'Error code: 429 - {"type":"error","error":{"type":"rate_limit_error",'
            '"message":"This request would exceed the rate limit for your '
            "organization (abc) of 40,000 input tokens per minute. For details, "
            'refer to: https://docs.claude.com/en/api/rate-limits."}}',
            status_code=429,
        ),
        "openai-quota": FakeAPIStatusError(
            "Error code: 429 - {'error': {'message': 'You exceeded your current "
            "quota, please check your plan and billing details.', 'type': "
            "'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}",
            status_code=429,
            code="insufficient_quota",
        ),
        "anthropic-credit": FakeAPIStatusError(
            'Error code: 400 - {"type":"error","error":{"type":'
            '"invalid_request_error","message":"Your credit balance is too low to '
            "access the Anthropic API. Please go to Plans & Billing to upgrade or "
            'purchase credits."}}',
            status_code=400,
        ),
        "openai-auth": FakeAPIStatusError(
            "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
            "sk-abc***xyz.', 'type': 'invalid_request_error', 'param': None, "
            "'code': 'invalid_api_key'}}",
            status_code=401,
            code="invalid_api_key",
        ),
    }


def small_policy(**overrides: Any) -> GuardPolicy:
    """A policy with small windows allowed, so the tests stay fast."""
    settings: dict[str, Any] = {
        "context_window": 60_000,
        "reserve_tokens": 1_000,
        "hard_min_tokens": 1_000,
        "warn_below_tokens": 1_000,
        "max_tool_result_share": 0.5,  # big results prune, rather than being cut
        **overrides,
    }
    return GuardPolicy(**settings)


class LimitedChatModel(ScriptedChatModel):
    """A scripted chat model that refuses any input over a hidden token limit.

    It measures its input (messages and bound tools) with ``count``, records each
    call's size in ``calls``, and raises ``overflow(tokens, limit)`` when the input
    is over ``limit``, or ``failure`` on every call when set. It streams.
    """

    limit: int
    count: Callable[[list[BaseMessage], Sequence[Any] | None], int]
    overflow: ErrorFactory = _anthropic
    failure: Exception | None = None
    model_name: str | None = "fake-limited"
    disable_streaming: bool = False
    calls: list[int] = Field(default_factory=list)

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        tokens = self.count(messages, kwargs.get("tools"))
        self.calls.append(tokens)
        if self.failure is not None:
            raise self.failure
        if tokens > self.limit:
            raise self.overflow(tokens, self.limit)
        return super().reply(messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        """Bind tools as OpenAI schemas, like the real integrations do."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def limited_model(
    limit: int,
    *,
    replies: Sequence[AIMessage | str] = ("done",),
    overflow: ErrorFactory = _anthropic,
    failure: Exception | None = None,
    model_name: str | None = "fake-limited",
    repeat: int = 1,
) -> LimitedChatModel:
    """A ``LimitedChatModel`` that counts like ``ContextGuard(small_policy())``."""
    counter = ContextGuard(small_policy())

    def count(messages: list[BaseMessage], tools: Sequence[Any] | None) -> int:
        return counter.count_tokens(messages, tools=tools)

    return LimitedChatModel(
        messages=iter(list(replies) * repeat),
        limit=limit,
        count=count,
        overflow=overflow,
        failure=failure,
        model_name=model_name,
    )


def filler(words: int, seed: int = 0) -> str:
    """Deterministic text of about ``words`` words (~2 tokens each)."""
    lines = []
    for i in range(0, words, 8):
        k = seed * 7919 + i
        lines.append(" ".join(f"w{(k * 31 + j * 17) % 997}" for j in range(8)))
    return "\n".join(lines)


def history(
    turns: int = 6, *, tool_words: int = 1_500, question: str = "What next?"
) -> list[BaseMessage]:
    """System, task, ``turns`` bash calls with bulky results, then a question."""
    steps = tool_history(
        turns,
        lambda k: filler(tool_words, k),
        system="You are a careful coding agent.",
        task="Fix the failing test in the repo.",
        tool="bash",
        args=lambda k, j: {"cmd": f"cat f{k}.py"},
    )
    return [*steps, HumanMessage(question, id="question")]


def summarize(messages: list[BaseMessage]) -> list[BaseMessage]:
    """A compactor: system messages, one summary, then the last user turn onward."""
    head = [m for m in messages if isinstance(m, SystemMessage)]
    last = max((i for i, m in enumerate(messages) if is_user(m)), default=0)
    middle = [m for m in messages[:last] if not isinstance(m, SystemMessage)]
    if not middle:
        return messages
    summary = with_marker(
        HumanMessage(f"Summary of {len(middle)} earlier messages.", id="summary"),
        "summary",
    )
    return [*head, summary, *messages[last:]]


def drop_oldest_turn(messages: list[BaseMessage]) -> list[BaseMessage]:
    """A compactor that drops the oldest tool call and its result, if any."""
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = {c["id"] for c in message.tool_calls}
            return [
                m
                for j, m in enumerate(messages)
                if j != i and not (isinstance(m, ToolMessage) and m.tool_call_id in ids)
            ]
    return messages
