"""Detection of provider "context too long" errors.

``classify_overflow`` checks LangChain's own ``ContextOverflowError`` first
(langchain-openai and langchain-anthropic raise it), then the texts providers
send: OpenAI and Azure OpenAI, Anthropic, Bedrock, Vertex AI / Gemini, Mistral,
Groq, xAI, Cerebras, Kimi, MiniMax, GitHub Copilot, OpenRouter, Ollama, vLLM,
llama.cpp server and LM Studio. ``silent_overflow`` catches a provider that
answers anyway: a reply whose reported input exceeds the window.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from cachetools import LRUCache

from ._events import GuardEvent

try:
    from langchain_core.exceptions import ContextOverflowError
except ImportError:  # pragma: no cover
    _NATIVE_OVERFLOW: tuple[type[BaseException], ...] = ()
else:
    _NATIVE_OVERFLOW = (ContextOverflowError,)

__all__ = [
    "LIMIT_FLOOR",
    "LIMIT_SHARE",
    "LimitMemory",
    "OverflowInfo",
    "classify_overflow",
    "ignored_limit",
    "scaled_limit",
    "silent_overflow",
]

_FLAGS = re.IGNORECASE | re.DOTALL
_NUM = r"\d{1,3}(?:,\d{3})+(?!\d)|\d+"
_REQ = rf"(?P<req>{_NUM})"
_OUT = rf"(?P<out>{_NUM})"
_LIM = rf"(?P<lim>{_NUM})"
_Q = r"""[\\'"]*"""

_PROVIDER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (hint, re.compile(pattern, _FLAGS))
    for hint, pattern in (
        ("openrouter", r"this endpoint's maximum context length"),
        (
            "anthropic",
            r"prompt is too long|input length and `?max_tokens`? exceed context limit",
        ),
        (
            "openai",
            r"context_length_exceeded|maximum context length is"
            r"|exceeds the context window|input tokens exceed the configured limit",
        ),
        ("xai", r"maximum prompt length is \d+"),
        ("copilot", r"model_max_prompt_tokens_exceeded|exceeds the limit of \d+"),
        ("kimi", r"exceeded model token limit"),
        ("minimax", r"context window exceeds limit"),
        ("groq", r"reduce the length of the messages or completion"),
        ("gemini", r"input token count.{0,40}exceeds the maximum number of tokens"),
        ("bedrock", r"input is too long for requested model"),
        ("mistral", r"too large for model with [\d,]+ maximum context length"),
        (
            "llama.cpp",
            r"exceeds? the available context size|exceed_context_size_error"
            r"|context size has been exceeded",
        ),
        ("lmstudio", r"when context the overflows|greater than the context length"),
        (
            "ollama",
            r"prompt is longer than the context length"
            r"|input length exceeds the context length",
        ),
        ("cerebras", r"(?:^|\s)4(?:00|13) status code \(no body\)"),
        ("chinese-proxy", r"上下文过长|上下文超出|超出最大上下文"),
        (
            "generic",
            r"request_too_large|exceeds? (?:the )?context window"
            r"|context (?:length|window) (?:has been )?exceeded",
        ),
    )
)

_SIZE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, _FLAGS)
    for pattern in (
        rf"{_REQ} tokens > {_LIM} maximum",
        rf"exceed context limit: {_REQ} \+ {_OUT} > {_LIM}",
        rf"maximum context length is {_LIM} tokens.{{0,80}}?"
        rf"(?:resulted in|requested(?: about)?) {_REQ} tokens",
        rf"configured limit of {_LIM} tokens.{{0,80}}?resulted in {_REQ} tokens",
        rf"input token count \(?{_REQ}?\)? ?exceeds the maximum number of tokens"
        rf" allowed \(?{_LIM}",
        rf"prompt contains {_REQ} tokens.{{0,80}}?too large for model with {_LIM}",
        rf"keep the first {_REQ} tokens.{{0,160}}?context length of only {_LIM}",
        rf"request \({_REQ} tokens\) exceeds the available context size \({_LIM}",
        rf"requested tokens \({_REQ}\) exceed context window of {_LIM}",
        rf"maximum prompt length is {_LIM}.{{0,40}}?contains {_REQ} tokens",
        rf"prompt token count of {_REQ} exceeds the limit of {_LIM}",
        rf"exceeded model token limit: {_LIM} \(requested: {_REQ}\)",
        rf"maximum context length is {_LIM} tokens.{{0,40}}?request has {_REQ} "
        rf"input tokens(?: plus {_OUT} {_Q}max_tokens)?",
        rf"n_prompt_tokens{_Q}\s*[:=]\s*{_REQ}",
        rf"n_ctx{_Q}\s*[:=]\s*{_LIM}",
        rf"maximum context length is {_LIM}",
        rf"{_LIM} maximum context length",
        rf"context length of only {_LIM}",
    )
)

_EXCLUDE_PATTERN = re.compile(
    r"rate[ _-]?limit|too many requests|tokens per min|requests per min|\btpm\b"
    r"|insufficient_quota|quota exceeded|exceeded your current quota"
    r"|resource_exhausted|credit balance is too low"
    r"|invalid[ _-]?(?:x-)?api[ _-]?key|incorrect api key"
    r"|authentication_error|permission_error",
    _FLAGS,
)
_STATUS_PATTERN = re.compile(
    rf"(?:error code|status(?:[ _]?code)?|httpstatuscode){_Q}[\s:=]*(\d{{3}})\b",
    _FLAGS,
)
_TOO_LARGE_PATTERN = re.compile(r"too large", _FLAGS)
# A 413 with no body (Cerebras through the Python SDKs: "Error code: 413").
_BARE_413 = re.compile(r"(?:error code:? )?413", _FLAGS)
_EXCLUDED_STATUSES = frozenset({401, 402, 403, 429})
_PAYLOAD_TOO_LARGE = 413
_STATUS_ATTRS = ("status_code", "status", "http_status", "code")
_MIN_RATIO = 0.5
"""``scaled_limit`` trusts the provider's count at most twice our own."""
_TEXT_ATTRS = ("body", "message", "code")
LIMIT_FLOOR = 1_024
"""A stated limit below this many tokens is never learned."""
LIMIT_SHARE = 8
"""A stated limit under 1/8 of the configured ``context_window`` is never learned."""


@dataclass(frozen=True)
class OverflowInfo:
    """A provider error classified as a context-length overflow."""

    provider_hint: str | None
    requested_tokens: int | None
    limit_tokens: int | None
    message: str


def classify_overflow(error: BaseException) -> OverflowInfo | None:
    """Return overflow details if `error` is a context-length overflow, else None."""
    chain = list(_walk(error))
    texts = [text for exc in chain for text in _texts(exc)]
    native = [exc for exc in chain if isinstance(exc, _NATIVE_OVERFLOW)]
    statuses = {status for exc in chain for status in _statuses(exc)}
    statuses.update(int(m) for text in texts for m in _STATUS_PATTERN.findall(text))
    if not native and (
        statuses & _EXCLUDED_STATUSES or any(map(_EXCLUDE_PATTERN.search, texts))
    ):
        return None
    matched = _match_provider(texts, statuses)
    if matched is None and not native:
        return None
    hint, message = matched or (None, next(_texts(native[0])) or repr(native[0]))
    requested, limit = _parse_sizes(texts)
    return OverflowInfo(hint, requested, limit, message)


def silent_overflow(reply: object, window: int) -> OverflowInfo | None:
    """An overflow the provider did not report as an error.

    Some providers (z.ai, some OpenAI-compatible servers) answer a prompt larger
    than the window; the reply's ``usage_metadata`` then reports more input tokens
    than the window holds. ``None`` when the reply has no usage or fits.
    """
    usage = getattr(reply, "usage_metadata", None)
    if not isinstance(usage, Mapping):
        return None
    tokens = usage.get("input_tokens")
    if not isinstance(tokens, int) or tokens <= window:
        return None
    return OverflowInfo(
        "silent",
        tokens,
        window,
        f"the reply reports {tokens:,} input tokens, more than the "
        f"{window:,}-token window: the provider accepted an overflowing prompt",
    )


def ignored_limit(limit: int, configured: int | None) -> GuardEvent | None:
    """The ``limit_ignored`` event if a provider's stated limit is not believed.

    Below ``LIMIT_FLOOR`` tokens no chat model is served: the figure is a
    misparse or a misconfigured server. Below ``1/LIMIT_SHARE`` of the window
    the user set (``configured``), it contradicts the user by too much to
    overrule them. None: the limit is plausible.
    """
    if limit < LIMIT_FLOOR:
        why = f"below the {LIMIT_FLOOR:,}-token floor"
    elif configured and limit * LIMIT_SHARE < configured:
        why = f"under 1/{LIMIT_SHARE} of context_window ({configured:,})"
    else:
        return None
    return GuardEvent("limit_ignored", detail=f"stated limit {limit:,} ignored: {why}")


def scaled_limit(info: OverflowInfo, tokens: int) -> int | None:
    """The limit ``info`` states, in our units: scaled when the provider counted more.

    ``tokens`` is our count of what the provider counted as ``requested_tokens``;
    the learned limit keeps that ratio (at most 2:1), so a history pruned under
    it by our count fits by the provider's.
    """
    limit, requested = info.limit_tokens, info.requested_tokens
    if limit is None:
        return None
    if not requested or requested <= tokens:
        return limit
    return int(limit * max(tokens / requested, _MIN_RATIO))


def _walk(error: BaseException) -> Iterator[BaseException]:
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        exc = pending.pop(0)
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        members = _attr(exc, "exceptions")
        if isinstance(members, (list, tuple)):
            pending.extend(m for m in members if isinstance(m, BaseException))
        pending.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)


def _texts(exc: BaseException) -> Iterator[str]:
    try:
        text = str(exc)
    except Exception:
        text = type(exc).__name__
    yield text
    for attr in _TEXT_ATTRS:
        value = _attr(exc, attr)
        if isinstance(value, (str, Mapping, list, tuple)) and value:
            yield str(value)
    response = _attr(exc, "response")
    if isinstance(response, Mapping):
        yield str(response)
    else:
        body = _attr(response, "text")
        if isinstance(body, str) and body:
            yield body


def _statuses(exc: BaseException) -> Iterator[int]:
    for source in (exc, _attr(exc, "response")):
        for attr in _STATUS_ATTRS:
            status = _as_status(_attr(source, attr))
            if status is not None:
                yield status


def _attr(source: object, name: str) -> object:
    if source is None:
        return None
    try:
        return getattr(source, name, None)
    except Exception:
        return None


def _as_status(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    if isinstance(value, str) and len(value) == 3 and value.isdigit():
        return int(value)
    return None


def _match_provider(texts: list[str], statuses: set[int]) -> tuple[str, str] | None:
    for hint, pattern in _PROVIDER_PATTERNS:
        for text in texts:
            if pattern.search(text):
                return hint, text
    if _PAYLOAD_TOO_LARGE in statuses:
        for text in texts:
            if _TOO_LARGE_PATTERN.search(text) or _BARE_413.fullmatch(text.strip()):
                return "generic", text
    return None


def _parse_sizes(texts: list[str]) -> tuple[int | None, int | None]:
    requested: int | None = None
    limit: int | None = None
    for pattern in _SIZE_PATTERNS:
        for text in texts:
            match = pattern.search(text)
            if match is None:
                continue
            groups = match.groupdict()
            if requested is None and groups.get("req"):
                requested = _to_int(groups["req"]) + _to_int(groups.get("out") or "0")
            if limit is None and groups.get("lim"):
                limit = _to_int(groups["lim"])
        if requested is not None and limit is not None:
            break
    return requested, limit


def _to_int(digits: str) -> int:
    return int(digits.replace(",", ""))


class LimitMemory:
    """Thread-safe record of the smallest context limit learned per model."""

    def __init__(self, maxsize: int = 1_024) -> None:
        """Create an empty memory of at most ``maxsize`` models."""
        self._lock = threading.Lock()
        self._limits: LRUCache[str, int] = LRUCache(maxsize)

    def learn(self, model: str, limit: int) -> None:
        """Record `limit` for `model`, keeping the smallest positive value seen."""
        if limit <= 0:
            return
        with self._lock:
            current = self._limits.get(model)
            if current is None or limit < current:
                self._limits[model] = limit

    def get(self, model: str) -> int | None:
        """Return the learned limit for `model`, or None if unknown."""
        with self._lock:
            return self._limits.get(model)
