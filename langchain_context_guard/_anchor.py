"""Usage anchoring: count a history's prefix as the provider itself reported it.

When an AIMessage carries ``usage_metadata``, the provider has told us what the
prompt that produced it cost (``input_tokens``, tool schemas included); that
prompt plus the reply is the history up to and including the message, so the
prefix counts as ``input_tokens + output_tokens`` and only later messages are
estimated. The ratio of
the provider's figure to our own count of that prefix calibrates every estimate
(never below 1: our estimates may overcount, never undercount, a calibrated prompt).

An anchor is ignored when the ratio is outside ``ANCHOR_RANGE``: far below, what
the provider saw was a pruned copy of this history; far above, this history is a
pruned copy of what it saw. On the shared trajectories the ratio lies between 0.78
and 1.28, and anchored counts are within 0.1% of the provider's (median).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ._tokens import REPLY_OVERHEAD, TokenCounter

ANCHOR_RANGE = (0.7, 1.5)
"""Accepted range of provider count / our count for an anchored prefix."""
CALIBRATION_RANGE = (0.5, 2.0)
"""Sanity range for a calibration measured on a prompt the guard prepared."""


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
    messages: Sequence[BaseMessage], counts: Sequence[int], extra: int = 0
) -> tuple[int, int] | None:
    """The last AIMessage with usage, as (index, prefix tokens), if it is usable.

    ``extra`` is what the prompt held besides messages (tool schemas, reply
    priming): the provider's ``input_tokens`` include it too.
    """
    for k in range(len(messages) - 1, -1, -1):
        anchored = anchor_tokens(messages[k])
        if anchored is None:
            continue
        ours = sum(counts[: k + 1]) + extra
        low, high = ANCHOR_RANGE
        if ours <= 0 or not low <= anchored / ours <= high:
            return None
        return k, anchored
    return None


def sent_key(message: BaseMessage, counter: TokenCounter) -> tuple[Any, ...]:
    """Names a prompt by its last message (id, type and size, to avoid collisions)."""
    return (message.id, message.type, counter.count_message(message))


def calibration_of(
    messages: Sequence[BaseMessage],
    sent: Mapping[tuple[Any, ...], int],
    counter: TokenCounter,
) -> float | None:
    """Provider count / our count of the prompt behind the last reply with usage.

    When the guard prepared that prompt itself (``sent`` holds our count of it,
    keyed by the message it followed), the reply's ``input_tokens`` is the
    provider's count of exactly that prompt: the truest calibration there is,
    and the one that still holds once the history is pruned before it is sent.
    """
    for k in range(len(messages) - 1, 0, -1):
        message = messages[k]
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        if not usage:
            continue
        ours = sent.get(sent_key(messages[k - 1], counter))
        prompt = int(usage.get("input_tokens") or 0)
        if not ours or prompt <= 0:
            return None
        ratio = prompt / ours
        return ratio if CALIBRATION_RANGE[0] <= ratio <= CALIBRATION_RANGE[1] else None
    return None


class Meter:
    """Counts one history and the candidates the passes derive from it.

    A candidate that still holds the original's very objects up to the anchor keeps
    the anchored prefix; any other is estimated in full, scaled by the calibration:
    ``calibration`` when given (measured on a prompt the guard itself prepared),
    else the anchor's ratio, never below 1.
    Counts are memoised by object for the life of the meter (one ``prepare`` call).
    """

    def __init__(
        self,
        counter: TokenCounter,
        original: list[BaseMessage],
        *,
        extra_tokens: int = 0,
        anchoring: bool = True,
        calibration: float | None = None,
    ) -> None:
        self._count = counter.count_message
        self._memo: dict[int, tuple[BaseMessage, int]] = {}
        self._totals: dict[int, tuple[list[BaseMessage], int]] = {}
        self.original = original
        self.extra = extra_tokens + REPLY_OVERHEAD
        counts = [self.count(m) for m in original]
        self.anchor = find_anchor(original, counts, self.extra) if anchoring else None
        self.scale = 1.0
        if calibration is not None:
            self.scale = max(1.0, calibration)
        elif self.anchor is not None:
            k, anchored = self.anchor
            self.scale = max(1.0, anchored / (sum(counts[: k + 1]) + self.extra))
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
                # The provider's figure already holds tool schemas and priming.
                rest = sum(map(self.count, messages[k + 1 :]))
                return anchored + math.ceil(rest * self.scale)
        body = sum(map(self.count, messages))
        return math.ceil(body * self.scale) + self.extra
