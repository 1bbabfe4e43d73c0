"""Anthropic prompt-cache breakpoints on what the guard sends.

Anthropic caches a prompt only up to blocks marked ``cache_control`` (at most 4
per request) and reads back the longest cached prefix ending at a breakpoint
(looking back about 20 blocks from each). ``mark_cache_breakpoints`` marks:

- the system message (stable across prunings),
- the last message the guard sent unchanged from its previous call
  (``GuardReport.reused``), so the prefix cached then is read back even after a
  pruning rewrote what follows it,
- the last message, so the whole prompt is written for the next call.

The marks are content-block keys that langchain-anthropic passes through
(``{"cache_control": {"type": "ephemeral"}}``); nothing here imports a provider
package. Other providers ignore or strip the key: mark only for Anthropic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` blocks per request."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking", "reasoning"})


def _markable(block: object) -> bool:
    if isinstance(block, str):
        return bool(block.strip())
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(str(block.get("text") or "").strip())


def _marked(message: BaseMessage, control: dict[str, Any]) -> BaseMessage | None:
    """``message`` with ``control`` on its last block; None if none can carry it."""
    if isinstance(message, AIMessage) and message.tool_calls:
        blocks = _blocks(message.content)
        uses = [
            b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        known = {b.get("id") for b in uses}
        blocks += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in message.tool_calls
            if c["id"] not in known
        ]
        blocks[-1] = {**blocks[-1], "cache_control": control}
        return message.model_copy(update={"content": blocks})
    blocks = _blocks(message.content)
    last = next((i for i in reversed(range(len(blocks))) if _markable(blocks[i])), None)
    if last is None:
        return None
    block = blocks[last]
    if isinstance(block, str):
        block = {"type": "text", "text": block}
    blocks[last] = {**block, "cache_control": control}
    return message.model_copy(update={"content": blocks})


def _blocks(content: str | list[Any]) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    return list(content)


def mark_cache_breakpoints(
    messages: Sequence[BaseMessage],
    reused: int,
    *,
    control: dict[str, Any] | None = None,
) -> list[BaseMessage]:
    """Copies of ``messages`` with Anthropic ``cache_control`` breakpoints.

    Args:
        messages: What the guard prepared (``PrepareResult.messages``).
        reused: Leading messages sent unchanged since the previous call
            (``GuardReport.reused``).
        control: The ``cache_control`` value; ``{"type": "ephemeral"}`` (five
            minutes) by default, ``{"type": "ephemeral", "ttl": "1h"}`` for an hour.

    Returns:
        A new list; messages without a breakpoint are the same objects. At most
        ``MAX_BREAKPOINTS`` are set, never on reasoning or empty blocks.
    """
    out = list(messages)
    control = dict(control or EPHEMERAL)
    wanted: list[int] = []
    system = [i for i, m in enumerate(out) if isinstance(m, SystemMessage)]
    if system:
        wanted.append(system[-1])
    if 0 < reused <= len(out):
        wanted.append(reused - 1)
    if out:
        wanted.append(len(out) - 1)
    done: set[int] = set()
    for i in sorted(set(wanted), reverse=True):
        # A message that cannot carry a mark hands it to the one before it.
        for j in range(i, -1, -1):
            if j in done:
                break
            marked = _marked(out[j], control)
            if marked is not None:
                out[j] = marked
                done.add(j)
                break
        if len(done) >= MAX_BREAKPOINTS:
            break
    return out
