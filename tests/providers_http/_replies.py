"""The stand-in providers' answers: scripted replies with real usage, as JSON or SSE.

Call ``k`` (counting accepted calls only) asks for the first tool of the request
while ``k < tool_steps``, with a path argument that names the call, then answers
in text; a test's ``Script`` picks the reply from the request instead. The
bodies and stream events follow the providers' API references (Chat Completions
``chat.completion`` / ``chat.completion.chunk``, Messages ``message`` and its
``message_start`` ... ``message_stop`` events).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._rules import Body, tokens

CREATED = 1_700_000_000
Event = tuple[str | None, Body | str]
"""One SSE event: its ``event:`` name (None: none) and its data."""


@dataclass(frozen=True)
class Usage:
    """What one accepted call cost, as the provider counts it."""

    prompt: int
    output: int
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Scripted:
    """A reply a test scripts (``ProviderServer(script=...)``): a call or an answer."""

    text: str
    tool: str | None = None
    """The tool to call, or None for a text answer."""
    arguments: Body | None = None
    """The call's arguments."""


Script = Callable[[Body], Scripted]
"""Picks the reply to an accepted request from its body."""


@dataclass(frozen=True)
class Step:
    """The scripted answer to accepted call ``index``."""

    index: int
    tool: str | None
    """The tool to call, or None for the final text answer."""
    compacted: bool = False
    """Anthropic compacted the request on the server: a ``compaction`` block first."""
    thinks: bool = False
    """Thinking or reasoning is on: the reply thinks before it answers."""
    signature: str = ""
    """The signature of the reply's thinking (Anthropic, Gemini)."""
    scripted: Scripted | None = None
    """The test's own reply, in place of reading module ``index``."""

    @property
    def thought(self) -> str:
        """The reply's thinking (or reasoning summary) text."""
        if self.tool is not None:
            return f"The checksum may break in module {self.index}: read it next."
        return f"Every module is read after {self.index} tool calls: answer now."

    @property
    def arguments(self) -> Body:
        """The tool call's arguments."""
        if self.scripted is not None and self.scripted.arguments is not None:
            return self.scripted.arguments
        return {"path": f"src/module_{self.index}.py"}

    @property
    def text(self) -> str:
        """The reply's text."""
        if self.scripted is not None:
            return self.scripted.text
        if self.tool is not None:
            return f"Reading src/module_{self.index}.py."
        return f"Done: the answer after {self.index} tool calls."

    def output_tokens(self, multiplier: float) -> int:
        """Completion tokens of this reply."""
        raw = tokens(self.text)
        if self.thinks:
            raw += tokens(self.thought)
        if self.tool is not None:
            raw += tokens(self.tool) + tokens(json.dumps(self.arguments))
        return math.ceil(raw * multiplier)


def first_tool(body: Body) -> str | None:
    """The name of the request's first tool (any provider's shape)."""
    for tool in body.get("tools") or []:
        declared = tool.get("functionDeclarations")  # Gemini
        function = declared[0] if declared else tool.get("function", tool)
        return str(function["name"])
    return None


# -- OpenAI ---------------------------------------------------------------------


def _openai_usage(usage: Usage) -> Body:
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.output,
        "total_tokens": usage.prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def openai_reply(step: Step, model: str, usage: Usage) -> Body:
    """A ``chat.completion`` body."""
    message: Body = {"role": "assistant", "content": step.text, "refusal": None}
    if step.tool is not None:
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": f"call_{step.index}",
                "type": "function",
                "function": {
                    "name": step.tool,
                    "arguments": json.dumps(step.arguments),
                },
            }
        ]
    return {
        "id": f"chatcmpl-{step.index}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop" if step.tool is None else "tool_calls",
            }
        ],
        "usage": _openai_usage(usage),
        "system_fingerprint": "fp_standin",
    }


def openai_stream(
    step: Step, model: str, usage: Usage, with_usage: bool
) -> list[Event]:
    """``chat.completion.chunk`` events, the usage chunk last when asked for."""

    def chunk(delta: Body, finish: str | None = None) -> Event:
        body: Body = {
            "id": f"chatcmpl-{step.index}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if with_usage:
            body["usage"] = None
        return None, body

    events = [chunk({"role": "assistant", "content": ""})]
    if step.tool is None:
        half = len(step.text) // 2
        events += [
            chunk({"content": step.text[:half]}),
            chunk({"content": step.text[half:]}),
        ]
        events.append(chunk({}, "stop"))
    else:
        call = {"index": 0, "id": f"call_{step.index}", "type": "function"}
        name = {"name": step.tool, "arguments": ""}
        events.append(chunk({"tool_calls": [{**call, "function": name}]}))
        arguments = {"arguments": json.dumps(step.arguments)}
        events.append(chunk({"tool_calls": [{"index": 0, "function": arguments}]}))
        events.append(chunk({}, "tool_calls"))
    if with_usage:
        last: Body = {**events[0][1], "choices": [], "usage": _openai_usage(usage)}  # type: ignore[dict-item]
        events.append((None, last))
    events.append((None, "[DONE]"))
    return events


# -- Anthropic ------------------------------------------------------------------


def _anthropic_usage(usage: Usage) -> Body:
    return {
        "input_tokens": usage.prompt - usage.cache_read - usage.cache_write,
        "output_tokens": usage.output,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


COMPACTION_SUMMARY = (
    "Summary of the conversation so far: modules read, checksum traced."
)
"""The text of the stand-in's ``compaction`` block."""


def anthropic_thinking(step: Step) -> Body:
    """The reply's signed ``thinking`` block."""
    return {"type": "thinking", "thinking": step.thought, "signature": step.signature}


def anthropic_content(step: Step) -> list[Body]:
    content: list[Body] = [{"type": "text", "text": step.text}]
    if step.thinks:
        content.insert(0, anthropic_thinking(step))
    if step.compacted:
        content.insert(0, {"type": "compaction", "content": COMPACTION_SUMMARY})
    if step.tool is not None:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{step.index:04d}",
                "name": step.tool,
                "input": step.arguments,
            }
        )
    return content


def anthropic_reply(step: Step, model: str, usage: Usage) -> Body:
    """A ``message`` body."""
    return {
        "id": f"msg_{step.index:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": anthropic_content(step),
        "stop_reason": "end_turn" if step.tool is None else "tool_use",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage),
    }


def anthropic_stream(step: Step, model: str, usage: Usage) -> list[Event]:
    """The ``message_start`` ... ``message_stop`` events of a reply."""
    start = anthropic_reply(step, model, usage)
    start.update(content=[], stop_reason=None)
    start["usage"] = {**start["usage"], "output_tokens": 1}
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(anthropic_content(step)):
        deltas: list[Body] = []
        if block["type"] == "text":
            opening: Body = {"type": "text", "text": ""}
            delta: Body = {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            deltas = [{"type": "signature_delta", "signature": block["signature"]}]
        else:
            opening = {**block, "input": {}}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block["input"]),
            }
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": opening,
                },
            ),
        ]
        events += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": d},
            )
            for d in [delta, *deltas]
        ]
        events.append(
            ("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    stop = "end_turn" if step.tool is None else "tool_use"
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": _anthropic_usage(usage),  # cumulative, as the API sends
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse(events: list[Event]) -> bytes:
    """The events as a ``text/event-stream`` body."""
    lines: list[str] = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def dump(body: Any) -> bytes:
    """A JSON body."""
    return json.dumps(body).encode()
