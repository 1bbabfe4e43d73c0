"""Signed thinking in a replay: would a model that binds it accept each prompt?

Newer Claude models bind each signed thinking block to the prompt that produced
it and reject a request once the messages before the block differ from it
("The block is bound to a different conversation"). ``with_signed_thinking``
gives every assistant message of a transcript such a block (its text and
signature derived from the message, so the same on every run), and ``Binding``
checks each prompt a strategy sends: the prompt of call ``k`` produced the
assistant message ``k``, so a block it keeps must sit behind exactly that
prompt again. A stale block in a running tool loop's final turn is the one
exception: every Claude model requires that turn to start with its block, so
no strategy may drop it, and the API drops it when asked (``drop_block``, as
``ContextGuardMiddleware`` asks for binding models); such a call counts as one
that drops a block, not as rejected, and the reply is taken as produced behind
the prompt the model read, without that block (our reading: the API binds a
reply to what its model saw).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ..engine import final_tool_turn

_PREFIX = "replay-"


def with_signed_thinking(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with a signed thinking block opening each assistant message."""
    out: list[BaseMessage] = []
    for k, message in enumerate(messages):
        if isinstance(message, AIMessage):
            message = _signed(message, k)
        out.append(message)
    return out


def _signed(message: AIMessage, k: int) -> AIMessage:
    content: Any = message.content
    blocks = list(content) if isinstance(content, list) else []
    if isinstance(content, str) and content:
        blocks = [{"type": "text", "text": content}]
    digest = hashlib.sha256(_key(message).encode()).hexdigest()[:24]
    thinking = {
        "type": "thinking",
        "thinking": f"Step {k}: what the last output says, and what to run next.",
        "signature": f"{_PREFIX}{k}-{digest}",
    }
    return message.model_copy(update={"content": [thinking, *blocks]})


def _key(message: BaseMessage) -> str:
    """The message as a provider receives it (content, tool calls, call id)."""
    calls = message.tool_calls if isinstance(message, AIMessage) else None
    call_id = getattr(message, "tool_call_id", None)
    return json.dumps(
        [message.type, message.content, calls, call_id], sort_keys=True, default=str
    )


def _replied(block: object) -> int | None:
    """The transcript index of the reply that holds ``block``, if it is ours."""
    if not (isinstance(block, dict) and block.get("type") == "thinking"):
        return None
    signature = str(block.get("signature") or "")
    if not signature.startswith(_PREFIX):
        return None
    return int(signature[len(_PREFIX) :].split("-", 1)[0])


@dataclass
class Binding:
    """One strategy's prompts over one transcript, as a binding model checks them."""

    produced: dict[int, list[str]] = field(default_factory=dict)
    """The prompt of call ``k`` (each message's key), which produced reply ``k``."""
    keys: dict[int, tuple[BaseMessage, str]] = field(default_factory=dict)

    def check(self, k: int, sent: Sequence[BaseMessage]) -> tuple[bool, bool, bool]:
        """Whether call ``k``'s prompt keeps a block, drops one, has a stale one."""
        keys = [self._key(m) for m in sent]
        kept = dropped = rejected = False
        final = final_tool_turn(sent)
        stale_final: list[Any] = []
        for i, message in enumerate(sent):
            if not isinstance(message, AIMessage):
                continue
            content: Any = message.content
            replies = (
                [_replied(b) for b in content] if isinstance(content, list) else []
            )
            if not any(r is not None for r in replies):
                dropped = True  # a reply sent without its block
                continue
            for at, reply in enumerate(replies):
                if reply is None:
                    continue
                prefix = keys[:i] + ([_blocks(content[:at])] if at else [])
                stale = prefix != self.produced.get(reply)
                if stale and i == final:
                    dropped = True  # the API's to drop (drop_block)
                    stale_final.append(content[at])
                    continue
                kept = True
                rejected = rejected or stale
        if stale_final:  # the prompt as the model read it
            message = sent[final]
            content = [b for b in message.content if b not in stale_final]
            keys[final] = _key(message.model_copy(update={"content": content}))
        self.produced[k] = keys
        return kept, dropped, rejected

    def _key(self, message: BaseMessage) -> str:
        hit = self.keys.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = _key(message)
        self.keys[id(message)] = (message, key)
        return key


def _blocks(blocks: list[Any]) -> str:
    return json.dumps(blocks, sort_keys=True, default=str)
