"""A stand-in for the OpenAI, Anthropic and Gemini HTTP APIs, on 127.0.0.1.

``ProviderServer`` serves ``POST /v1/chat/completions`` (OpenAI Chat
Completions), ``POST /v1/responses`` (OpenAI Responses), ``POST /v1/messages``
(Anthropic) and ``POST /v1beta/models/{model}:generateContent`` /
``:streamGenerateContent`` (Gemini; ``/v1/`` too) from a ``ThreadingHTTPServer``
in a thread. Each request is counted and checked (``_rules*``): over ``limit`` or
breaking a rule, it gets the provider's 400; otherwise a scripted reply (or the
test's ``script``'s) with the provider's usage fields (``_replies*``), streamed as
SSE when the request asks. Every request is kept in ``exchanges`` with its verdict.

Anthropic's server-side compaction: a request with the ``compact_20260112`` edit
(refused without its ``compact-2026-01-12`` beta header) whose input reaches the
edit's trigger gets a ``compaction`` block first in its reply; the input of a
request is counted from its latest compaction block on (``_rules``). The
Responses API does the same with ``context_management``'s ``compact_threshold``
and a ``compaction`` item.

Prompt caching, as the providers report it: OpenAI reports the leading messages
(or input items) a request shares with the previous one as ``cached_tokens``
(from 1,024 tokens, in steps of 128); Anthropic reads back the longest prefix
ending at a ``cache_control`` breakpoint that an earlier request wrote, and
writes the rest up to its last breakpoint.

Reasoning rules (each module's docstring gives the sources, and marks what is
our reading with [inferred]); replies think when the request asks for it, so a
scripted agent carries the provider's signed reasoning back:

- Anthropic, thinking on (``_rules_anthropic``): replies start with a signed
  ``thinking`` block; a running tool loop's assistant message starts with
  thinking; thinking comes first in its message and never last; a thinking block
  keeps the text its signature was given; thinking off: no thinking in a final
  assistant message. Binding models (``claude-fable-5-1``) refuse a block whose
  prefix changed ("bound to a different conversation"), or drop it and report
  ``input_transformations`` with ``prefix_mismatch_behavior: "drop_block"`` and
  the ``thinking-binding-controls-2026-08-01`` beta. ``ledger`` holds the blocks.
- OpenAI Responses (``_rules_responses``): a ``reasoning`` item is followed by
  its item, an item produced with reasoning keeps it, ``encrypted_content`` comes
  back unchanged with ``store=false``, every ``function_call`` is answered, input
  before the latest ``compaction`` item is not read. ``reasoning`` holds the items.
- Gemini (``_rules_gemini``): the current turn's function calls carry their
  ``thoughtSignature``, a signature vouches for its exact part, every call turn
  is answered with as many function responses. ``signatures`` holds them.
- Tool names (``_rules_names``): each provider's pattern, on ``tools`` and on
  the calls in the history.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from . import _replies as replies
from . import _replies_gemini as gemini_replies
from . import _replies_responses as responses_replies
from . import _rules as rules
from . import _rules_anthropic as thinking
from . import _rules_gemini as gemini
from . import _rules_names as names
from . import _rules_responses as responses
from ._cache import PromptCache
from ._rules import Body, Refusal

Provider = Literal["openai", "anthropic", "responses", "gemini"]
PATHS: dict[str, Provider] = {
    "/v1/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
}
GEMINI_PATH = re.compile(
    r"^/(?:v1|v1beta)/models/([^/:]+):(generateContent|streamGenerateContent)$"
)
"""Gemini's route: the model and the method are in the path."""
COUNT = {
    "openai": rules.openai_tokens,
    "anthropic": rules.anthropic_tokens,
    "responses": responses.responses_tokens,
    "gemini": gemini.gemini_tokens,
}
TOO_LONG = {
    "openai": rules.openai_too_long,
    "anthropic": rules.anthropic_too_long,
    "responses": responses.responses_too_long,
    "gemini": gemini.gemini_too_long,
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
    dropped: tuple[thinking.Stale, ...] = ()
    """Stale thinking blocks a binding model dropped (``drop_block``)."""


class ProviderServer:
    """Both providers on one port; see the module docstring."""

    def __init__(
        self,
        *,
        limit: int = 16_000,
        multiplier: float = 1.0,
        tool_steps: int = 20,
        script: replies.Script | None = None,
    ) -> None:
        self.limit = limit
        self.script = script
        """Picks each reply from the request, in place of ``tool_steps``."""
        self.multiplier = multiplier
        self.tool_steps = tool_steps
        self.exchanges: list[Exchange] = []
        self._accepted = 0
        self._cache = PromptCache(multiplier)
        self.ledger = thinking.Ledger()
        """The thinking blocks this server signed (Anthropic)."""
        self.reasoning = responses.Ledger()
        """The reasoning items this server produced (Responses)."""
        self.signatures = gemini.Ledger()
        """The thought signatures this server issued (Gemini)."""
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
            refusal, dropped = self._refusal(provider, body, betas)
            read = thinking.without(body, dropped) if dropped else body
            prompt = COUNT[provider](read, self.multiplier)
            if refusal is None and prompt > self.limit:
                refusal = TOO_LONG[provider](prompt, self.limit)
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
            scripted = self.script(body) if self.script is not None else None
            if scripted is not None:
                tool = scripted.tool
            trigger = {
                "anthropic": rules.compaction_trigger,
                "responses": responses.compaction_threshold,
            }.get(provider, lambda _: None)(body)
            compacted = trigger is not None and prompt >= trigger
            step = replies.Step(index, tool, compacted, scripted=scripted)
            if provider == "anthropic" and thinking.thinking_on(body):
                step = self._signed(body, step)
            elif provider == "gemini" or (
                body.get("reasoning") and provider == "responses"
            ):
                step = dataclasses.replace(step, thinks=True)
            usage = self._usage(provider, read, prompt, step)
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
                    dropped=tuple(dropped),
                )
            )
            payload, stream = self._reply(provider, body, step, usage, dropped, betas)
        return 200, payload, stream

    def _signed(self, body: Body, step: replies.Step) -> replies.Step:
        """``step`` with its thinking block signed behind the request's prefix."""
        before = replies.anthropic_content(step)[: int(step.compacted)]
        reply = {"role": "assistant", "content": before}
        messages = [*body["messages"], reply]
        prefix = thinking.Prefixes({**body, "messages": messages}).of(
            len(messages) - 1, len(before)
        )
        signature = self.ledger.sign(step.thought, prefix, str(body.get("model", "")))
        return dataclasses.replace(step, thinks=True, signature=signature)

    def _refusal(
        self, provider: Provider, body: Body, betas: str
    ) -> tuple[Refusal | None, list[thinking.Stale]]:
        """The first rule ``body`` breaks, and the stale blocks to drop."""
        if provider == "openai":
            broken = rules.openai_violation(body) or names.openai_violation(body)
            return broken, []
        if provider == "responses":
            broken = names.responses_violation(body) or responses.responses_violation(
                body, self.reasoning
            )
            return broken, []
        if provider == "gemini":
            return gemini.gemini_violation(body, self.signatures), []
        if rules.compaction_trigger(body) is not None:
            if "compact-2026-01-12" not in betas.split(","):
                return rules.anthropic_beta_missing("compact-2026-01-12"), []
        broken = rules.anthropic_violation(body) or names.anthropic_violation(body)
        broken = broken or rules.anthropic_cache_limit(body)
        if broken is not None:
            return broken, []
        verdict = thinking.thinking_violation(body, betas, self.ledger)
        if isinstance(verdict, Refusal):
            return verdict, []
        return None, verdict or []

    def _usage(
        self, provider: Provider, body: Body, prompt: int, step: replies.Step
    ) -> replies.Usage:
        output = step.output_tokens(self.multiplier)
        read, write = self._cache.measure(provider, body, prompt)
        return replies.Usage(prompt, output, cache_read=read, cache_write=write)

    def _reply(
        self,
        provider: Provider,
        body: Body,
        step: replies.Step,
        usage: replies.Usage,
        dropped: list[thinking.Stale],
        betas: str,
    ) -> tuple[bytes, bool]:
        """The scripted reply as the request asked for it: JSON, or SSE events."""
        model = str(body.get("model", ""))
        streaming = bool(body.get("stream"))
        if provider == "responses":
            items = responses_replies.output(step, body, self.reasoning)
            whole = responses_replies.response(step, body, usage, items)
            if streaming:
                return replies.sse(responses_replies.stream(whole)), True
            return replies.dump(whole), False
        if provider == "gemini":
            parts = gemini_replies.parts(step, body, self.signatures)
            whole = gemini_replies.response(step, body, usage, parts)
            if streaming:
                return replies.sse(gemini_replies.stream(whole)), True
            return replies.dump(whole), False
        if provider == "anthropic":
            reply = replies.anthropic_reply(step, model, usage)
            if thinking.BINDING_BETA in betas.split(","):
                reply["input_transformations"] = [s.report() for s in dropped]
            if not streaming:
                return replies.dump(reply), False
            events = replies.anthropic_stream(step, model, usage)
            if "input_transformations" in reply:  # final in ``message_start``
                start = events[0][1]["message"]  # type: ignore[index]
                start["input_transformations"] = reply["input_transformations"]
            return replies.sse(events), True
        if not streaming:
            return replies.dump(replies.openai_reply(step, model, usage)), False
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return replies.sse(replies.openai_stream(step, model, usage, with_usage)), True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body leave in one write, flushed per request

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        provider = PATHS.get(path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        route = GEMINI_PATH.match(path)
        if route is not None:
            provider = "gemini"
            streaming = route.group(2) == "streamGenerateContent"
            body = {**body, "model": route.group(1), "stream": streaming}
        if provider is None:
            self._send(404, b'{"error": {"message": "not found"}}', stream=False)
            return
        status, payload, stream = self.server.provider.answer(  # type: ignore[attr-defined]
            provider, body, self.headers.get("anthropic-beta", "")
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
