"""Usage anchoring: count a history's prefix as the provider itself reported it.

When an AIMessage carries ``usage_metadata``, the provider has told us what the
prompt that produced it cost (``input_tokens``); that prompt plus the reply is the
history up to and including the message, so the prefix counts as
``input_tokens + output_tokens`` and only later messages are estimated. The ratio of
the provider's figure to our own count of that prefix calibrates every estimate
(never below 1: our estimates may overcount, never undercount, a calibrated prompt).

An anchor is ignored when the ratio is outside ``ANCHOR_RANGE``: far below, what
the provider saw was a pruned copy of this history; far above, this history is a
pruned copy of what it saw. On the shared trajectories the ratio lies between 0.78
and 1.28, and anchored counts are within 0.1% of the provider's (median).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage

from ._tokens import REPLY_OVERHEAD, TokenCounter

ANCHOR_RANGE = (0.7, 1.5)
"""Accepted range of provider count / our count for an anchored prefix."""


def anchor_tokens(message: BaseMessage) -> int | None:
    """Tokens a provider reported for the prompt that produced ``message`` plus it."""
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or 0)
    if prompt <= 0:
        return None
    output = int(usage.get("output_tokens") or 0)
    details = usage.get("output_token_details") or {}
    reasoning = int(details.get("reasoning") or 0)
    # Hidden reasoning is billed as output but not sent back with the message.
    if not _has_reasoning(message):
        output = max(0, output - reasoning)
    return prompt + output


def _has_reasoning(message: BaseMessage) -> bool:
    if "reasoning_content" in message.additional_kwargs:
        return True
    content = message.content
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in {"thinking", "reasoning"}
        for b in content
    )


def find_anchor(
    messages: Sequence[BaseMessage], counts: Sequence[int]
) -> tuple[int, int] | None:
    """The last AIMessage with usage, as (index, prefix tokens), if it is usable."""
    for k in range(len(messages) - 1, -1, -1):
        anchored = anchor_tokens(messages[k])
        if anchored is None:
            continue
        ours = sum(counts[: k + 1])
        low, high = ANCHOR_RANGE
        if ours <= 0 or not low <= anchored / ours <= high:
            return None
        return k, anchored
    return None


class Meter:
    """Counts one history and the candidates the passes derive from it.

    A candidate that still holds the original's very objects up to the anchor keeps
    the anchored prefix; any other is estimated in full, scaled by the calibration.
    Counts are memoised by object for the life of the meter (one ``prepare`` call).
    """

    def __init__(
        self,
        counter: TokenCounter,
        original: list[BaseMessage],
        *,
        extra_tokens: int = 0,
        anchoring: bool = True,
    ) -> None:
        self._count = counter.count_message
        self._memo: dict[int, tuple[BaseMessage, int]] = {}
        self._totals: dict[int, tuple[list[BaseMessage], int]] = {}
        self.original = original
        self.extra = extra_tokens + REPLY_OVERHEAD
        counts = [self.count(m) for m in original]
        self.anchor = find_anchor(original, counts) if anchoring else None
        self.scale = 1.0
        if self.anchor is not None:
            k, anchored = self.anchor
            self.scale = max(1.0, anchored / sum(counts[: k + 1]))
        self.before = self(original)

    def count(self, message: BaseMessage) -> int:
        """Our (unscaled) count of one message."""
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = self._count(message)
        self._memo[id(message)] = (message, value)
        return value

    def cost(self, message: BaseMessage) -> int:
        """One message's calibrated cost, as trimming weighs it."""
        return math.ceil(self.count(message) * self.scale)

    def __call__(self, messages: list[BaseMessage]) -> int:
        """Tokens of a whole candidate prompt (messages, extras, reply priming)."""
        hit = self._totals.get(id(messages))
        if hit is not None and hit[0] is messages:
            return hit[1]
        total = self._measure(messages)
        self._totals[id(messages)] = (messages, total)
        return total

    def _measure(self, messages: list[BaseMessage]) -> int:
        if self.anchor is not None:
            k, anchored = self.anchor
            original = self.original
            if len(messages) > k and all(
                messages[i] is original[i] for i in range(k + 1)
            ):
                rest = sum(self.count(m) for m in messages[k + 1 :])
                return anchored + math.ceil(rest * self.scale) + self.extra
        body = sum(self.count(m) for m in messages)
        return math.ceil(body * self.scale) + self.extra
