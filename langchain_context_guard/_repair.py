"""Pass 6: make every tool call answered exactly once, right after it."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ._messages import MARKER_KEY, same_list, without_tool_calls

SYNTHETIC_RESULT = (
    "Error: no result is available for this tool call; it was lost or removed "
    "from the history. Call the tool again if you still need its output."
)


def synthetic_result(call_id: str, name: str) -> ToolMessage:
    """The error result the guard adds for a tool call that has none."""
    return ToolMessage(
        content=SYNTHETIC_RESULT,
        tool_call_id=call_id,
        name=name,
        status="error",
        id=f"context-guard-missing-{call_id}",
        additional_kwargs={MARKER_KEY: {"kind": "synthetic_result"}},
    )


def repair_tool_pairs(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Repair tool-call/tool-result pairing (seed 004's transcript repair).

    Moves a displaced result to just after its call, keeps the first of duplicate
    results, drops results whose call is gone, drops a repeated call id from a later
    assistant message, and adds a synthetic error result (``status="error"``, marked
    as made by the guard) after a call that has none. Afterwards every tool call is
    answered exactly once by the ToolMessages directly after it, and no ToolMessage
    stands anywhere else. Run it last, after anything that removes messages.
    """
    first_result: dict[str, tuple[int, ToolMessage]] = {}
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            first_result.setdefault(message.tool_call_id, (i, message))
    out: list[BaseMessage] = []
    seen_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            continue  # placed after its call below, or dropped as an orphan
        if not isinstance(message, AIMessage) or not message.tool_calls:
            out.append(message)
            continue
        message = _without_repeats(message, seen_calls)
        out.append(message)
        found: list[tuple[int, ToolMessage]] = []
        missing: list[ToolMessage] = []
        for call in message.tool_calls:
            call_id = call["id"] or ""
            seen_calls.add(call_id)
            hit = first_result.get(call_id)
            if hit is not None:
                found.append(hit)
            else:
                missing.append(synthetic_result(call_id, call["name"]))
        # Results keep the order they had; synthetic ones follow, in call order.
        out.extend(result for _, result in sorted(found, key=lambda h: h[0]))
        out.extend(missing)
    return messages if same_list(messages, out) else out  # type: ignore[return-value]


def _without_repeats(message: AIMessage, seen_calls: set[str]) -> AIMessage:
    """Drop call ids already used earlier, or earlier in the same message."""
    ids = [c["id"] or "" for c in message.tool_calls]
    if not any(i in seen_calls for i in ids) and len(set(ids)) == len(ids):
        return message
    kept = []
    used = set(seen_calls)
    for call in message.tool_calls:
        call_id = call["id"] or ""
        if call_id not in used:
            kept.append(call)
        used.add(call_id)
    repeated = {i for i in ids if i in seen_calls}
    return without_tool_calls(message, repeated).model_copy(update={"tool_calls": kept})
