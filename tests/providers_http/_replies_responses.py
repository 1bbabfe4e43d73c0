"""The Responses API stand-in's answers: a ``response`` object, as JSON or SSE.

The output holds, in order: a ``compaction`` item when the request's input
reached its ``compact_threshold``, a ``reasoning`` item when the request asks for
``reasoning`` (its ``encrypted_content`` when ``include`` names
``reasoning.encrypted_content``), then the ``function_call`` or the ``message``.
Shapes and events follow the API reference (``response``,
``response.output_item.added`` ... ``response.completed``).
"""

from __future__ import annotations

import json

from ._replies import COMPACTION_SUMMARY, CREATED, Event, Step, Usage
from ._rules import Body, tokens
from ._rules_responses import Ledger


def output(step: Step, body: Body, ledger: Ledger) -> list[Body]:
    """The reply's output items (the reasoning item recorded in ``ledger``)."""
    items: list[Body] = []
    if step.compacted:
        summary = json.dumps({"summary": COMPACTION_SUMMARY})
        items.append(
            {
                "type": "compaction",
                "id": f"cmp_{step.index:04d}",
                "encrypted_content": summary,
            }
        )
    if step.tool is not None:
        answer: Body = {
            "type": "function_call",
            "id": f"fc_{step.index:04d}",
            "call_id": f"call_{step.index}",
            "name": step.tool,
            "arguments": json.dumps(step.arguments),
            "status": "completed",
        }
    else:
        answer = {
            "type": "message",
            "id": f"msg_{step.index:04d}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    if body.get("reasoning"):
        rs = f"rs_{step.index:04d}"
        item: Body = {
            "type": "reasoning",
            "id": rs,
            "summary": [{"type": "summary_text", "text": step.thought}],
        }
        encrypted = ledger.issue(rs, step.thought, [answer["id"]])
        if "reasoning.encrypted_content" in (body.get("include") or []):
            item["encrypted_content"] = encrypted
        items.append(item)
    return [*items, answer]


def _usage(usage: Usage, reasoning: int) -> Body:
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.prompt + usage.output,
    }


def response(step: Step, body: Body, usage: Usage, items: list[Body]) -> Body:
    """A completed ``response`` object."""
    reasoning = tokens(step.thought) if step.thinks else 0
    return {
        "id": f"resp_{step.index:04d}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": str(body.get("model", "")),
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "store": body.get("store", True),
        "reasoning": body.get("reasoning"),
        "text": {"format": {"type": "text"}},
        "metadata": {},
        "usage": _usage(usage, reasoning),
    }


def stream(whole: Body) -> list[Event]:
    """The events of ``whole``: created, each item added and done, completed."""
    start = {**whole, "status": "in_progress", "output": [], "usage": None}
    events: list[Event] = [
        ("response.created", {"type": "response.created", "response": start})
    ]
    for index, item in enumerate(whole["output"]):
        opening = {**item}
        if item["type"] == "message":
            opening["content"] = []
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": opening,
                },
            )
        )
        if item["type"] == "message":
            part = item["content"][0]
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": part["text"],
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "item": item,
                },
            )
        )
    events.append(
        ("response.completed", {"type": "response.completed", "response": whole})
    )
    return [
        (name, {**data, "sequence_number": n})  # type: ignore[dict-item]
        for n, (name, data) in enumerate(events)
    ]
