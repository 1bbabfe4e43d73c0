"""A stand-in for the OpenAI and Anthropic HTTP APIs, on 127.0.0.1.

``ProviderServer`` serves ``POST /v1/chat/completions`` (OpenAI) and
``POST /v1/messages`` (Anthropic) from a ``ThreadingHTTPServer`` in a thread.
Each request is counted and checked (``_rules``): over ``limit`` or breaking a
message rule, it gets the provider's 400; otherwise a scripted reply with the
provider's usage fields (``_replies``), streamed as SSE when the request asks.
Every request is kept in ``exchanges`` with its verdict.

Anthropic's server-side compaction: a request with the ``compact_20260112`` edit
(refused without its ``compact-2026-01-12`` beta header) whose input reaches the
edit's trigger gets a ``compaction`` block first in its reply; the input of a
request is counted from its latest compaction block on (``_rules``).

Prompt caching, as the providers report it: OpenAI reports the leading messages
a request shares with the previous one as ``cached_tokens`` (from 1,024 tokens, in
steps of 128); Anthropic reads back the longest prefix ending at a
``cache_control`` breakpoint that an earlier request wrote, and writes the rest
up to its last breakpoint.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from . import _replies as replies
from . import _rules as rules
from ._rules import Body, Refusal

Provider = Literal["openai", "anthropic"]
PATHS: dict[str, Provider] = {
    "/v1/chat/completions": "openai",
    "/v1/messages": "anthropic",
}


@dataclass(frozen=True)
class Exchange:
    """One request the server received, and what it answered."""

    provider: Provider
    body: Body
    tokens: int
    status: int
    verdict: Literal["ok", "too_long", "invalid"]
    error: str = ""
    usage: replies.Usage | None = None
    betas: str = ""
    """The ``anthropic-beta`` header."""
    compacted: bool = False
    """Answered with a ``compaction`` block (server-side compaction)."""


@dataclass
class _Cache:
    """What earlier accepted requests left in the provider's prompt cache."""

    openai: list[str] = field(default_factory=list)
    anthropic: set[str] = field(default_factory=set)


def _key(value: Any) -> str:
    """A digest of a JSON value without its ``cache_control`` marks."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "cache_control"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    text = json.dumps(strip(value), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _marked(value: Any) -> bool:
    if isinstance(value, dict):
        return "cache_control" in value or any(map(_marked, value.values()))
    if isinstance(value, list):
        return any(map(_marked, value))
    return False


class ProviderServer:
    """Both providers on one port; see the module docstring."""

    def __init__(
        self,
        *,
        limit: int = 16_000,
        multiplier: float = 1.0,
        tool_steps: int = 20,
    ) -> None:
        self.limit = limit
        self.multiplier = multiplier
        self.tool_steps = tool_steps
        self.exchanges: list[Exchange] = []
        self._accepted = 0
        self._cache = _Cache()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._http.provider = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def rejections(self) -> list[Exchange]:
        """Every request answered with an error."""
        return [e for e in self.exchanges if e.verdict != "ok"]

    @property
    def accepted(self) -> list[Exchange]:
        """Every request answered with a reply."""
        return [e for e in self.exchanges if e.verdict == "ok"]

    def start(self) -> ProviderServer:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and free the port."""
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def answer(
        self, provider: Provider, body: Body, betas: str = ""
    ) -> tuple[int, bytes, bool]:
        """Status, body and whether it is an event stream, for one request."""
        with self._lock:
            count = (
                rules.openai_tokens if provider == "openai" else rules.anthropic_tokens
            )
            prompt = count(body, self.multiplier)
            refusal = self._refusal(provider, body, prompt, betas)
            if refusal is not None:
                self.exchanges.append(
                    Exchange(
                        provider,
                        body,
                        prompt,
                        refusal.status,
                        refusal.kind,
                        refusal.message,
                        betas=betas,
                    )
                )
                return refusal.status, replies.dump(refusal.body), False
            index = self._accepted
            self._accepted += 1
            tool = replies.first_tool(body) if index < self.tool_steps else None
            trigger = (
                rules.compaction_trigger(body) if provider == "anthropic" else None
            )
            compacted = trigger is not None and prompt >= trigger
            step = replies.Step(index, tool, compacted)
            usage = self._usage(provider, body, prompt, step)
            self.exchanges.append(
                Exchange(
                    provider,
                    body,
                    prompt,
                    200,
                    "ok",
                    usage=usage,
                    betas=betas,
                    compacted=compacted,
                )
            )
        payload, stream = _reply(provider, body, step, usage)
        return 200, payload, stream

    def _refusal(
        self, provider: Provider, body: Body, prompt: int, betas: str
    ) -> Refusal | None:
        if provider == "anthropic" and rules.compaction_trigger(body) is not None:
            if "compact-2026-01-12" not in betas.split(","):
                return rules.anthropic_beta_missing("compact-2026-01-12")
        if provider == "openai":
            broken = rules.openai_violation(body)
            too_long = rules.openai_too_long
        else:
            broken = rules.anthropic_violation(body)
            broken = broken or rules.anthropic_cache_limit(body)
            too_long = rules.anthropic_too_long
        if broken is not None:
            return broken
        return too_long(prompt, self.limit) if prompt > self.limit else None

    def _usage(
        self, provider: Provider, body: Body, prompt: int, step: replies.Step
    ) -> replies.Usage:
        output = step.output_tokens(self.multiplier)
        if provider == "openai":
            return replies.Usage(prompt, output, cache_read=self._openai_cached(body))
        read, write = self._anthropic_cached(body, prompt)
        return replies.Usage(prompt, output, cache_read=read, cache_write=write)

    def _openai_cached(self, body: Body) -> int:
        """Tokens of the leading messages this request shares with the previous one."""
        messages = body["messages"]
        keys = [_key([body.get("tools"), m]) for m in messages]
        earlier, shared = self._cache.openai, 0
        while shared < min(len(keys), len(earlier)) and keys[shared] == earlier[shared]:
            shared += 1
        self._cache.openai = keys
        cached = math.ceil(
            rules.openai_messages_tokens(messages[:shared]) * self.multiplier
        )
        return cached // 128 * 128 if cached >= 1_024 else 0

    def _anthropic_cached(self, body: Body, prompt: int) -> tuple[int, int]:
        """Tokens read from and written to the cache, by ``cache_control`` marks."""
        head = [body.get("tools"), body.get("system")]
        messages = body["messages"]
        breakpoints = [i for i, m in enumerate(messages) if _marked(m)]
        if _marked(body.get("system")):
            breakpoints.insert(0, -1)
        if not breakpoints:
            return 0, 0
        sizes = {b: self._prefix_tokens(body, messages[: b + 1]) for b in breakpoints}
        keys = {b: _key([head, messages[: b + 1]]) for b in breakpoints}
        read = max(
            (sizes[b] for b in breakpoints if keys[b] in self._cache.anthropic),
            default=0,
        )
        self._cache.anthropic.update(keys.values())
        read = min(read, prompt)
        return read, min(max(sizes[breakpoints[-1]] - read, 0), prompt - read)

    def _prefix_tokens(self, body: Body, messages: list[Body]) -> int:
        return rules.anthropic_tokens({**body, "messages": messages}, self.multiplier)


def _reply(
    provider: Provider, body: Body, step: replies.Step, usage: replies.Usage
) -> tuple[bytes, bool]:
    """The scripted reply as the request asked for it: JSON, or SSE events."""
    model = str(body.get("model", ""))
    if not body.get("stream"):
        make = replies.openai_reply if provider == "openai" else replies.anthropic_reply
        return replies.dump(make(step, model, usage)), False
    if provider == "anthropic":
        return replies.sse(replies.anthropic_stream(step, model, usage)), True
    with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return replies.sse(replies.openai_stream(step, model, usage, with_usage)), True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body leave in one write, flushed per request

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        provider = PATHS.get(self.path.split("?")[0])
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if provider is None:
            self._send(404, b'{"error": {"message": "not found"}}', stream=False)
            return
        status, payload, stream = self.server.provider.answer(  # type: ignore[attr-defined]
            provider, json.loads(raw), self.headers.get("anthropic-beta", "")
        )
        self._send(status, payload, stream=stream)

    def _send(self, status: int, payload: bytes, *, stream: bool) -> None:
        self.send_response(status)
        kind = "text/event-stream" if stream else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the exchanges are the log."""
