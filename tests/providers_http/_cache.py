"""The providers' prompt caches, as their usage fields report them.

OpenAI (Chat Completions and Responses) reports the leading messages or input
items a request shares with the previous one as ``cached_tokens``, from 1,024
tokens, in steps of 128. Anthropic reads back the longest prefix ending at a
``cache_control`` breakpoint that an earlier request wrote, and writes the rest
up to its last breakpoint. Gemini's implicit cache is not modelled (0 read).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from . import _rules as rules
from . import _rules_responses as responses
from ._rules import Body


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


class PromptCache:
    """What earlier accepted requests left in each provider's prompt cache."""

    def __init__(self, multiplier: float) -> None:
        self.multiplier = multiplier
        self.openai: list[str] = []
        self.anthropic: set[str] = set()

    def measure(self, provider: str, body: Body, prompt: int) -> tuple[int, int]:
        """Tokens of ``body`` read from and written to the cache (and remember it)."""
        if provider == "openai":
            messages = body["messages"]
            keys = [_key([body.get("tools"), m]) for m in messages]
            sizes = [rules.openai_messages_tokens([m]) for m in messages]
            return self._shared(keys, sizes), 0
        if provider == "responses":
            items = responses.items_of(body)
            items = items[responses.latest_compaction(items) :]
            keys = [_key([body.get("tools"), i]) for i in items]
            sizes = [responses.item_tokens(i) for i in items]
            return self._shared(keys, sizes), 0
        if provider == "anthropic":
            return self._anthropic(body, prompt)
        return 0, 0

    def _shared(self, keys: list[str], sizes: list[int]) -> int:
        """Tokens of the leading units this request shares with the previous one."""
        earlier, shared = self.openai, 0
        while shared < min(len(keys), len(earlier)) and keys[shared] == earlier[shared]:
            shared += 1
        self.openai = keys
        cached = math.ceil(sum(sizes[:shared]) * self.multiplier)
        return cached // 128 * 128 if cached >= 1_024 else 0

    def _anthropic(self, body: Body, prompt: int) -> tuple[int, int]:
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
            (sizes[b] for b in breakpoints if keys[b] in self.anthropic),
            default=0,
        )
        self.anthropic.update(keys.values())
        read = min(read, prompt)
        return read, min(max(sizes[breakpoints[-1]] - read, 0), prompt - read)

    def _prefix_tokens(self, body: Body, messages: list[Body]) -> int:
        return rules.anthropic_tokens({**body, "messages": messages}, self.multiplier)
