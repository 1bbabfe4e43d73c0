from __future__ import annotations

import threading

import pytest
from langchain_core.exceptions import ContextOverflowError

from langchain_context_guard.engine._overflow import (
    LimitMemory,
    OverflowInfo,
    classify_overflow,
)
from tests.fakes import OPENAI_TPM, FakeAPIStatusError, FakeClientError


class FakeResponse:
    """Shaped like ``httpx.Response``."""

    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text


class UnreadResponse:
    """Like a streamed ``httpx.Response`` whose body was never read."""

    status_code = 400

    @property
    def text(self) -> str:
        raise RuntimeError("Attempted to access streaming response content")


class HTTPError(Exception):
    def __init__(self, message: str, response: object) -> None:
        super().__init__(message)
        self.response = response


def chained(outer: str, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError(outer) from exc
    except RuntimeError as err:
        return err


def implicit(outer: Exception, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904
    except Exception as err:
        return err


ANTHROPIC_413 = (
    'Error code: 413 - {"type": "error", "error": {"type": "request_too_large", '
    '"message": "Request exceeds the maximum allowed number of bytes."}}'
)
OPENAI_CTX = (
    "This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in 130000 tokens (129500 in the messages, 500 in the functions). "
    "Please reduce the length of the messages or functions."
)
OPENAI_BODY = {
    "error": {
        "message": OPENAI_CTX,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_CTX = (
    'Error code: 400 - {"type": "error", "error": {"type": "invalid_request_error", '
    '"message": "prompt is too long: 213462 tokens > 200000 maximum"}, '
    '"request_id": "req_011CVjxiYzEFcAQC4Fk87zw2"}'
)
LLAMA_BODY = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size. try increasing "
        "the context size or enable context shift",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 14429,
        "n_ctx": 8192,
    }
}
CASES: list[tuple[str | None, BaseException, bool, int | None, int | None]] = [
    (
        "anthropic",
        FakeAPIStatusError(
            ANTHROPIC_CTX,
            status_code=400,
            body={
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 213462 tokens > 200000 maximum",
                },
            },
        ),
        True,
        213462,
        200000,
    ),
    (
        "anthropic",
        ValueError(
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > "
            "200000, decrease input length or `max_tokens` and try again"
        ),
        True,
        205192,
        200000,
    ),
    (
        "anthropic",
        chained(
            "agent step failed", FakeAPIStatusError(ANTHROPIC_CTX, status_code=400)
        ),
        True,
        213462,
        200000,
    ),
    (
        "openai",
        FakeAPIStatusError(
            "Bad Request",
            status_code=400,
            body=OPENAI_BODY,
            code="context_length_exceeded",
        ),
        True,
        130000,
        128000,
    ),
    (
        "openai",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': 'Your input exceeds the context "
            "window of this model. Please adjust your input and try again.', 'type': "
            "'invalid_request_error', 'param': 'input', 'code': "
            "'context_length_exceeded'}}",
            status_code=400,
            body={"error": {"code": "context_length_exceeded", "message": "..."}},
            code="context_length_exceeded",
        ),
        True,
        None,
        None,
    ),
    (
        "openai",
        RuntimeError(
            "This model's maximum context length is 128,000 tokens. However, your "
            "messages resulted in 130,512 tokens. Please reduce the length of the "
            "messages."
        ),
        True,
        130512,
        128000,
    ),
    (
        "openai",
        RuntimeError(
            "Error code: 400 - {'error': {'message': 'Input tokens exceed the "
            "configured limit of 272000 tokens. Your messages resulted in 301234 "
            "tokens. Please reduce the length of the messages.', 'type': "
            "'invalid_request_error', 'param': 'messages', 'code': "
            "'context_length_exceeded'}}"
        ),
        True,
        301234,
        272000,
    ),
    (
        "openai",
        RuntimeError(
            "Error code: 400 - {'object': 'error', 'message': \"This model's maximum "
            "context length is 4096 tokens. However, you requested 5000 tokens (4000 "
            "in the messages, 1000 in the completion). Please reduce the length of "
            "the messages or completion.\", 'type': 'BadRequestError', 'code': 400}"
        ),
        True,
        5000,
        4096,
    ),
    (
        "gemini",
        RuntimeError(
            "400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': 'The input "
            "token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).', 'status': 'INVALID_ARGUMENT'}}"
        ),
        True,
        1200000,
        1048576,
    ),
    (
        "bedrock",
        FakeClientError(
            "ValidationException",
            "Input is too long for requested model.",
            "Converse",
            400,
        ),
        True,
        None,
        None,
    ),
    (
        "anthropic",
        FakeClientError(
            "ValidationException",
            "The model returned the following errors: prompt is too long: "
            "200049 tokens > 200000 maximum",
            "InvokeModel",
            400,
        ),
        True,
        200049,
        200000,
    ),
    (
        "mistral",
        RuntimeError(
            'Status 400. Body: {"object":"error","message":"Prompt contains 40000 '
            "tokens and 0 draft tokens, too large for model with 32768 maximum "
            'context length","type":"invalid_request_message_error","param":null,'
            '"code":null}'
        ),
        True,
        40000,
        32768,
    ),
    (
        "openrouter",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': \"This endpoint's maximum "
            "context length is 8192 tokens. However, you requested about 9000 tokens "
            "(8000 of text input, 1000 in the output). Please reduce the length of "
            'either one, or use the "middle-out" transform to compress your prompt '
            "automatically.\", 'code': 400}}",
            status_code=400,
        ),
        True,
        9000,
        8192,
    ),
    (
        "llama.cpp",
        FakeAPIStatusError("Error code: 400", status_code=400, body=LLAMA_BODY),
        True,
        14429,
        8192,
    ),
    (
        "llama.cpp",
        RuntimeError(
            '{"error":{"code":400,"message":"request (4390 tokens) exceeds the '
            'available context size (4096 tokens), try increasing it","type":'
            '"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}}'
        ),
        True,
        4390,
        4096,
    ),
    (
        "lmstudio",
        FakeAPIStatusError(
            "Error code: 400 - {'error': 'Trying to keep the first 5000 tokens when "
            "context the overflows. However, the model is loaded with context length "
            "of only 4096 tokens, which is not enough. Try to load the model with a "
            "larger context length, or provide a shorter input'}",
            status_code=400,
        ),
        True,
        5000,
        4096,
    ),
    (
        "lmstudio",
        RuntimeError(
            "Error code: 400 - {'error': 'The number of tokens to keep from the "
            "initial prompt is greater than the context length. Try to load the "
            "model with a larger context length, or provide a shorter input'}"
        ),
        True,
        None,
        None,
    ),
    (
        "generic",
        FakeAPIStatusError(ANTHROPIC_413, status_code=413),
        True,
        None,
        None,
    ),
    (
        "generic",
        FakeAPIStatusError(
            "Payload Too Large",
            status_code=413,
            body="<html><h1>413 Request Entity Too Large</h1></html>",
        ),
        True,
        None,
        None,
    ),
    (
        "chinese-proxy",
        RuntimeError(
            "Error code: 400 - {'error': {'message': '上下文过长\uff0c请精简输入后重试 "
            "(request id: 20250101123456789)', 'type': 'new_api_error'}}"
        ),
        True,
        None,
        None,
    ),
    (
        "chinese-proxy",
        RuntimeError("Error code: 400 - {'error': {'message': '上下文超出模型限制'}}"),
        True,
        None,
        None,
    ),
    (
        "chinese-proxy",
        RuntimeError("请求失败: 输入超出最大上下文长度 (code: 400)"),
        True,
        None,
        None,
    ),
    (
        "bedrock",
        HTTPError(
            "400 Bad Request",
            FakeResponse(
                400,
                '{"message":"Input is too long for requested model."}',
            ),
        ),
        True,
        None,
        None,
    ),
    (
        "openai",
        implicit(
            ValueError("failed to handle provider error"),
            FakeAPIStatusError(OPENAI_CTX, status_code=400),
        ),
        True,
        130000,
        128000,
    ),
    (None, ContextOverflowError("input exceeds context"), True, None, None),
    (
        "anthropic",
        ContextOverflowError("prompt is too long: 213462 tokens > 200000 maximum"),
        True,
        213462,
        200000,
    ),
    # Not overflows.
    (
        "openai-tpm",
        FakeAPIStatusError(OPENAI_TPM, status_code=429, code="rate_limit_exceeded"),
        False,
        None,
        None,
    ),
    ("openai-tpm-text", RuntimeError(OPENAI_TPM), False, None, None),
    (
        "openai-rate-limit",
        RuntimeError(
            "Rate limit reached for gpt-4 in organization org-xyz on tokens per min "
            "(TPM): Limit 10000, Used 9500, Requested 1200. Please try again in 4.2s."
        ),
        False,
        None,
        None,
    ),
    (
        "anthropic-rate-limit",
        FakeAPIStatusError(
            'Error code: 429 - {"type":"error","error":{"type":"rate_limit_error",'
            '"message":"This request would exceed the rate limit for your '
            "organization (abc) of 40,000 input tokens per minute. For details, "
            'refer to: https://docs.claude.com/en/api/rate-limits."}}',
            status_code=429,
        ),
        False,
        None,
        None,
    ),
    (
        "429-too-large",
        FakeAPIStatusError(
            "Request too large: prompt is too long for your tier", status_code=429
        ),
        False,
        None,
        None,
    ),
    (
        "rate-limit-wrapping-overflow",
        chained(
            "This model's maximum context length is 8192 tokens",
            FakeAPIStatusError("Too Many Requests", status_code=429),
        ),
        False,
        None,
        None,
    ),
    (
        "gemini-quota",
        RuntimeError(
            "429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You "
            "exceeded your current quota. Quota exceeded for metric: "
            "generativelanguage.googleapis.com/generate_content_free_tier_input_"
            "token_count, limit: 250000', 'status': 'RESOURCE_EXHAUSTED'}}"
        ),
        False,
        None,
        None,
    ),
    (
        "openai-quota",
        FakeAPIStatusError(
            "Error code: 429 - {'error': {'message': 'You exceeded your current "
            "quota, please check your plan and billing details.', 'type': "
            "'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}",
            status_code=429,
            code="insufficient_quota",
        ),
        False,
        None,
        None,
    ),
    (
        "anthropic-credit",
        FakeAPIStatusError(
            'Error code: 400 - {"type":"error","error":{"type":'
            '"invalid_request_error","message":"Your credit balance is too low to '
            "access the Anthropic API. Please go to Plans & Billing to upgrade or "
            'purchase credits."}}',
            status_code=400,
        ),
        False,
        None,
        None,
    ),
    (
        "openai-auth",
        FakeAPIStatusError(
            "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
            "sk-abc***xyz. You can find your API key at "
            "https://platform.openai.com/account/api-keys.', 'type': "
            "'invalid_request_error', 'param': None, 'code': 'invalid_api_key'}}",
            status_code=401,
            code="invalid_api_key",
        ),
        False,
        None,
        None,
    ),
    (
        "anthropic-forbidden",
        FakeAPIStatusError(
            'Error code: 403 - {"type":"error","error":{"type":"permission_error",'
            '"message":"Your API key does not have permission to use the specified '
            'resource."}}',
            status_code=403,
        ),
        False,
        None,
        None,
    ),
    (
        "bad-request",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': \"Invalid 'messages[1].content': "
            "string too long.\", 'type': 'invalid_request_error'}}",
            status_code=400,
        ),
        False,
        None,
        None,
    ),
    (
        "unread-response",
        HTTPError("400 Bad Request", UnreadResponse()),
        False,
        None,
        None,
    ),
    ("timeout", TimeoutError("Request timed out."), False, None, None),
    ("value-error", ValueError("invalid literal for int()"), False, None, None),
]

IDS = [
    "anthropic-400",
    "anthropic-max-tokens",
    "anthropic-chained",
    "openai-body-only",
    "openai-context-window",
    "openai-commas",
    "openai-responses",
    "vllm",
    "gemini",
    "bedrock-client-error",
    "bedrock-anthropic",
    "mistral",
    "openrouter",
    "llamacpp-body",
    "llamacpp-sizes",
    "lmstudio-keep-first",
    "lmstudio-greater",
    "anthropic-413",
    "http-413",
    "zh-guochang",
    "zh-chaochu",
    "zh-zuida",
    "response-text",
    "implicit-context",
    "langchain-native",
    "langchain-native-text",
    "openai-tpm",
    "openai-tpm-text",
    "openai-rate-limit",
    "anthropic-rate-limit",
    "429-too-large",
    "rate-limit-wrapping-overflow",
    "gemini-quota",
    "openai-quota",
    "anthropic-credit",
    "openai-auth",
    "anthropic-forbidden",
    "bad-request",
    "unread-response",
    "timeout",
    "value-error",
]


@pytest.mark.parametrize(
    ("provider", "error", "is_overflow", "requested", "limit"), CASES, ids=IDS
)
def test_classify_overflow(
    provider: str | None,
    error: BaseException,
    is_overflow: bool,
    requested: int | None,
    limit: int | None,
) -> None:
    info = classify_overflow(error)
    if not is_overflow:
        assert info is None
        return
    assert info is not None
    assert info.provider_hint == provider
    assert (info.requested_tokens, info.limit_tokens) == (requested, limit)
    assert info.message


def test_ids_match_cases() -> None:
    assert len(IDS) == len(CASES) == len(set(IDS))


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ([ValueError("boom"), RuntimeError(ANTHROPIC_CTX)], True),
        ([ValueError("boom"), KeyError("x")], False),
        ([RuntimeError(ANTHROPIC_CTX), RuntimeError(OPENAI_TPM)], False),
    ],
    ids=["overflow-member", "no-overflow", "rate-limit-member-wins"],
)
def test_exception_group_members(members: list[Exception], expected: bool) -> None:
    group = ExceptionGroup("tool calls failed", members)
    info = classify_overflow(chained("graph failed", group))
    assert (info is not None) is expected


def test_message_is_matching_text() -> None:
    info = classify_overflow(
        FakeAPIStatusError("Bad Request", status_code=400, body=OPENAI_BODY)
    )
    assert info is not None
    assert "maximum context length is 128000" in info.message


def test_info_is_frozen() -> None:
    info = OverflowInfo("openai", 10, 5, "too long")
    with pytest.raises(AttributeError):
        info.limit_tokens = 6  # type: ignore[misc]


class BrokenError(Exception):
    @property
    def message(self) -> str:
        raise RuntimeError("broken property")

    def __str__(self) -> str:
        raise RuntimeError("broken __str__")


def test_broken_error_attributes_are_tolerated() -> None:
    assert classify_overflow(BrokenError()) is None
    info = classify_overflow(chained("prompt is too long", BrokenError()))
    assert info is not None
    assert info.provider_hint == "anthropic"


def test_cyclic_chain_terminates() -> None:
    first = RuntimeError("outer")
    second = RuntimeError("prompt is too long: 10 tokens > 5 maximum")
    first.__context__ = second
    second.__context__ = first
    info = classify_overflow(first)
    assert info is not None
    assert (info.requested_tokens, info.limit_tokens) == (10, 5)


def test_limit_memory_keeps_smallest() -> None:
    memory = LimitMemory()
    assert memory.get("gpt-4o") is None
    memory.learn("gpt-4o", 128000)
    memory.learn("gpt-4o", 130000)
    memory.learn("claude", 200000)
    assert memory.get("gpt-4o") == 128000
    memory.learn("gpt-4o", 100000)
    assert memory.get("gpt-4o") == 100000
    assert memory.get("claude") == 200000
    memory.learn("claude", 0)
    assert memory.get("claude") == 200000


def test_limit_memory_concurrent_learning() -> None:
    memory = LimitMemory()
    barrier = threading.Barrier(8, timeout=120)  # a dead thread fails, never hangs

    def worker(offset: int) -> None:
        barrier.wait()
        for value in range(1000 + offset, 5000, 8):
            memory.learn("model", value)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.get("model") == 1000
