"""One case per provider: the overflow text it really sends is recognised.

The texts are the providers' own (as their SDKs or OpenAI-compatible clients
show them), collected from their issue trackers and from pi-mono's live overflow
tests (``packages/ai/test/context-overflow.test.ts``).
"""

from __future__ import annotations

import pytest
from langchain_core.exceptions import ContextOverflowError as LangChainOverflow
from langchain_core.messages import AIMessage

from langchain_context_guard import ContextGuardError, ContextOverflowError
from langchain_context_guard.engine._overflow import classify_overflow, silent_overflow
from tests.fakes import FakeAPIStatusError, FakeClientError

# provider, error, (requested, limit) parsed from the text
PROVIDERS: list[tuple[str, BaseException, tuple[int | None, int | None]]] = [
    (
        "openai",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': \"This model's maximum context "
            "length is 128000 tokens. However, your messages resulted in 140211 "
            "tokens. Please reduce the length of the messages.\", 'type': "
            "'invalid_request_error', 'param': 'messages', 'code': "
            "'context_length_exceeded'}}",
            status_code=400,
        ),
        (140211, 128000),
    ),
    (
        "azure",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': \"This model's maximum context "
            "length is 16384 tokens. However, your messages resulted in 17042 tokens "
            "(16980 in the messages, 62 in the functions). Please reduce the length "
            "of the messages or functions.\", 'type': 'invalid_request_error', "
            "'param': 'messages', 'code': 'context_length_exceeded'}}",
            status_code=400,
        ),
        (17042, 16384),
    ),
    (
        "anthropic",
        FakeAPIStatusError(
            "Error code: 400 - {'type': 'error', 'error': {'type': "
            "'invalid_request_error', 'message': 'prompt is too long: 213462 tokens "
            "> 200000 maximum'}}",
            status_code=400,
        ),
        (213462, 200000),
    ),
    (
        "bedrock",
        FakeClientError(
            "ValidationException",
            "Input is too long for requested model.",
            "Converse",
            400,
        ),
        (None, None),
    ),
    (
        "vertex-gemini",
        RuntimeError(
            "400 The input token count (1196265) exceeds the maximum number of "
            "tokens allowed (1048575)."
        ),
        (1196265, 1048575),
    ),
    (
        "mistral",
        FakeAPIStatusError(
            'Status 400. Body: {"object":"error","message":"Prompt contains 33279 '
            "tokens and 0 draft tokens, too large for model with 32768 maximum "
            'context length","type":"invalid_request_message_error","param":null,'
            '"code":null}',
            status_code=400,
        ),
        (33279, 32768),
    ),
    (
        "groq",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': 'Please reduce the length of "
            "the messages or completion.', 'type': 'invalid_request_error', "
            "'param': 'messages', 'code': 'context_length_exceeded'}}",
            status_code=400,
        ),
        (None, None),
    ),
    (
        "xai",
        FakeAPIStatusError(
            "Error code: 400 - {'code': 'Client specified an invalid argument', "
            "'error': \"This model's maximum prompt length is 131072 but the request "
            'contains 537812 tokens."}',
            status_code=400,
        ),
        (537812, 131072),
    ),
    (
        "cerebras",
        FakeAPIStatusError("Error code: 413", status_code=413),
        (None, None),
    ),
    ("cerebras-js", RuntimeError("400 status code (no body)"), (None, None)),
    (
        "kimi",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': 'Invalid request: Your request "
            "exceeded model token limit: 262144 (requested: 302113)', 'type': "
            "'invalid_request_error'}}",
            status_code=400,
        ),
        (302113, 262144),
    ),
    (
        "minimax",
        RuntimeError(
            "Error code: 400 - {'type': 'error', 'error': {'type': "
            "'bad_request_error', 'message': 'invalid params, context window "
            "exceeds limit (2013)', 'http_code': '400'}}"
        ),
        (None, None),
    ),
    (
        "github-copilot",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': 'prompt token count of 139427 "
            "exceeds the limit of 128000', 'code': "
            "'model_max_prompt_tokens_exceeded'}}",
            status_code=400,
        ),
        (139427, 128000),
    ),
    (
        "ollama",
        RuntimeError(
            '{"error":"{\\"error\\":{\\"code\\":400,\\"message\\":\\"request (8889 '
            "tokens) exceeds the available context size (4096 tokens), try "
            'increasing it\\",\\"type\\":\\"exceed_context_size_error\\",'
            '\\"n_prompt_tokens\\":8889,\\"n_ctx\\":4096}}"} (status code: 400)'
        ),
        (8889, 4096),
    ),
    (
        "ollama-no-shift",
        RuntimeError(
            "the prompt is longer than the context length currently available to "
            "the model (status code: 400)"
        ),
        (None, None),
    ),
    (
        "vllm",
        FakeAPIStatusError(
            "Error code: 400 - {'error': {'message': \"This model's maximum context "
            "length is 2048 tokens. However, your request has 8 input tokens plus "
            "2045 'max_tokens'. Please reduce one or the other. (parameter="
            "input_tokens, max_tokens, value=(8, 2045))\", 'type': "
            "'BadRequestError', 'param': 'input_tokens, max_tokens', 'code': 400}}",
            status_code=400,
        ),
        (2053, 2048),
    ),
    (
        "vllm-legacy",
        FakeAPIStatusError(
            "Error code: 400 - {'object': 'error', 'message': \"This model's maximum "
            "context length is 16384 tokens. However, you requested 122946 tokens "
            "(112946 in the messages, 10000 in the completion). Please reduce the "
            "length of the messages or completion.\", 'type': 'BadRequestError', "
            "'param': None, 'code': 400}",
            status_code=400,
        ),
        (122946, 16384),
    ),
    (
        "llama.cpp",
        FakeAPIStatusError(
            'Error code: 400 - {"error":{"code":400,"message":"the request exceeds '
            'the available context size, try increasing it","type":'
            '"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}',
            status_code=400,
        ),
        (9000, 8192),
    ),
]


@pytest.mark.parametrize(
    ("error", "sizes"),
    [(e, s) for _, e, s in PROVIDERS],
    ids=[p for p, _, _ in PROVIDERS],
)
def test_provider_overflow_text_is_recognised(
    error: BaseException, sizes: tuple[int | None, int | None]
) -> None:
    info = classify_overflow(error)
    assert info is not None
    assert (info.requested_tokens, info.limit_tokens) == sizes


@pytest.mark.parametrize(
    "error",
    [
        FakeAPIStatusError("Error code: 400", status_code=400),
        FakeAPIStatusError(
            "Error code: 401 - {'error': {'message': 'Incorrect API key provided'}}",
            status_code=401,
        ),
        RuntimeError("400 Bad Request: messages[3].content must be a string"),
    ],
    ids=["bare-400", "auth", "bad-request"],
)
def test_other_errors_are_not_overflows(error: BaseException) -> None:
    assert classify_overflow(error) is None


def test_langchain_overflow_class_is_checked_first() -> None:
    # langchain-openai raises this for context_length_exceeded; the text alone
    # would not be recognised.
    info = classify_overflow(LangChainOverflow("Bad request"))
    assert info is not None


def test_our_overflow_error_is_langchains() -> None:
    err = ContextOverflowError("still too long", tokens=10, limit=5, attempts=2)
    assert isinstance(err, LangChainOverflow)
    assert isinstance(err, ContextGuardError)
    with pytest.raises(LangChainOverflow):
        raise err


def test_silent_overflow_from_reported_usage() -> None:
    usage = {"input_tokens": 140_000, "output_tokens": 12, "total_tokens": 140_012}
    reply = AIMessage("ok", usage_metadata=usage)  # type: ignore[arg-type]
    info = silent_overflow(reply, 128_000)
    assert info is not None
    assert (info.provider_hint, info.requested_tokens, info.limit_tokens) == (
        "silent",
        140_000,
        128_000,
    )
    fits = {"input_tokens": 90_000, "output_tokens": 12, "total_tokens": 90_012}
    assert silent_overflow(AIMessage("ok", usage_metadata=fits), 128_000) is None  # type: ignore[arg-type]
    assert silent_overflow(AIMessage("ok"), 128_000) is None
