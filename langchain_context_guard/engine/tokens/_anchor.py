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
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage

from .._messages import assistant_count, holds_reply, usage_cleared
from ._cache_keys import content_key
from ._counters import REPLY_OVERHEAD, TokenCounter

ANCHOR_RANGE = (0.7, 1.5)
"""Accepted range of provider count / our count for an anchored prefix."""
CALIBRATION_RANGE = ANCHOR_RANGE
"""Plausible range for a calibration measured on a prompt the guard prepared;
outside it, the prompt the reply answered was not the one the guard prepared."""


class UsageMissingWarning(UserWarning):
    """A streamed reply carried no usage, so the guard cannot calibrate its counts."""


def warn_missing_usage(messages: Sequence[BaseMessage], start: int, model: Any) -> bool:
    """Warn if the newest reply (from ``start`` on) was streamed without usage.

    Streamed, as the reply is a merged ``AIMessageChunk``, or as ``model`` is set
    not to stream usage (``stream_usage``, as in ``ChatOpenAI``): such a reply
    has no ``usage_metadata`` to calibrate with. True when it warned.
    """
    for message in reversed(messages[start:]):
        if not isinstance(message, AIMessage):
            continue
        chunk = isinstance(message, AIMessageChunk)
        reported = message.usage_metadata or usage_cleared(message)
        if reported or not (chunk or _no_stream_usage(model)):
            return False
        warnings.warn(
            "langchain-context-guard: the model's reply carried no usage_metadata, "
            "so token counts cannot be calibrated against the provider's and keep "
            "the uncalibrated_margin. When streaming, ask for usage (e.g. "
            "ChatOpenAI(stream_usage=True)).",
            UsageMissingWarning,
            stacklevel=5,
        )
        return True
    return False


def _no_stream_usage(model: Any) -> bool:
    return getattr(model, "stream_usage", True) is not True


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


def sent_key(message: BaseMessage, counter: TokenCounter, at: int) -> tuple[Any, ...]:
    """Names a prompt by its last message, at index ``at`` of the history.

    By id, type and size; a message without an id (an LCEL loop's tool results
    and replies) by its place, content and tool call instead, so the reply to a
    prompt is still matched to our count of it.
    """
    size = counter.count_message(message)
    if message.id:
        return (message.id, message.type, size)
    call = getattr(message, "tool_call_id", None)
    return (None, message.type, size, at, call, content_key(message))


def calibration_for(reply: BaseMessage, ours: int | None) -> float | None:
    """Provider count / our count of the prompt that produced ``reply``.

    ``ours`` is the guard's count of that prompt when it prepared it itself: the
    reply's ``input_tokens`` is then the provider's count of exactly that prompt,
    the truest calibration there is, and one that still holds once the history is
    pruned before it is sent.
    """
    usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
    prompt = int(usage.get("input_tokens") or 0) if usage else 0
    if not ours or prompt <= 0:
        return None
    ratio = prompt / ours
    return ratio if CALIBRATION_RANGE[0] <= ratio <= CALIBRATION_RANGE[1] else None


@dataclass(frozen=True, slots=True)
class Gauge:
    """Turns our (unscaled) counts of a history into the guard's token figures.

    A history that still holds the original's very objects up to the anchor
    counts the provider's figure for that prefix plus the rest, scaled; any other
    is estimated in full, scaled, plus ``extra`` (tool schemas, reply priming).
    """

    scale: float = 1.0
    extra: int = 0
    anchor: int = -1
    """Index of the anchoring message, -1 for none."""
    anchored: int = 0
    """The provider's tokens for the original up to and including the anchor."""
    anchor_body: int = 0
    """Our count of that prefix."""
    margin: float = 0.0
    """Share of its estimated tokens a history is held to be larger by, when the
    guard decides what fits (calibration drifts as new messages come in)."""

    def tokens(self, body: int, intact: int) -> int:
        """Tokens of a history whose messages we count ``body``.

        ``intact``: how many of its first messages are the original's objects.
        """
        if self.anchor >= 0 and intact > self.anchor:
            return self.anchored + math.ceil((body - self.anchor_body) * self.scale)
        return math.ceil(body * self.scale) + self.extra

    def cost(self, count: int) -> int:
        """One message's calibrated cost."""
        return math.ceil(count * self.scale)

    def planned(self, body: int, intact: int) -> int:
        """``tokens`` plus the margin on what is estimated: what must fit."""
        if self.anchor >= 0 and intact > self.anchor:
            estimated = (body - self.anchor_body) * self.scale
        else:
            estimated = body * self.scale
        return self.tokens(body, intact) + math.ceil(max(estimated, 0) * self.margin)

    def room(self, budget: int) -> float:
        """Our (unscaled) count a trimmed history may have to fit ``budget``."""
        return (budget - self.extra) / (self.scale * (1 + self.margin))


def last_usage(messages: Sequence[BaseMessage], start: int = 0) -> int:
    """Index of the last message from ``start`` on whose usage can anchor, or -1."""
    for k in range(len(messages) - 1, start - 1, -1):
        if anchor_tokens(messages[k]) is not None:
            return k
    return -1


def make_gauge(
    messages: Sequence[BaseMessage],
    *,
    usage_at: int,
    usage_body: int,
    extra: int,
    anchoring: bool = True,
    sent: tuple[int, bool] | None = None,
    carried: float | None = None,
    margins: tuple[float, float] = (0.0, 0.0),
) -> tuple[Gauge, float | None]:
    """The gauge of a history whose last usage is at ``usage_at``.

    Also returns the ratio of the provider's count to ours that the history
    itself shows (None: none).

    ``sent`` is what the guard itself sent for the prompt behind that reply, when
    it prepared it: our count of it, and whether it was this history's prefix
    unchanged. The reply's ``input_tokens`` then calibrates exactly, and it
    anchors the prefix only if the prompt was that prefix. Without ``sent``, or
    when the reply looks like it answered the whole prefix instead (its ratio to
    ``sent`` is implausible, or further from the last ratio than its ratio to the
    prefix), the usage anchors when its ratio to our count of the prefix is
    plausible. A
    history that shows no ratio is scaled by ``remap`` (the last one seen), if
    any. ``margins``: the gauge's margin when calibrated, and when not.
    """
    if not anchoring:
        return Gauge(1.0, extra, margin=margins[1]), None
    anchor, anchored, own = -1, 0, None
    if usage_at >= 0:
        value = anchor_tokens(messages[usage_at]) or 0
        ours = usage_body + extra
        low, high = ANCHOR_RANGE
        plausible = ours > 0 and low <= value / ours <= high
        whole = value / ours if plausible else None
        if sent is not None:
            own = calibration_for(messages[usage_at], sent[0])
            if own is not None and whole is not None and carried is not None:
                # Did the reply answer what the guard sent, or the whole prefix
                # (an app that sent something else)? Believe the likelier ratio,
                # but never the smaller one on a guess: under-counting overflows.
                if own < whole and abs(whole - carried) < abs(own - carried):
                    own = None
        if own is None and whole is not None:
            own, sent = whole, None
        if whole is not None and (sent is None or sent[1]):
            anchor, anchored = usage_at, value
    ratio = own if own is not None else carried
    scale = max(1.0, ratio) if ratio is not None else 1.0
    margin = margins[0] if ratio is not None else margins[1]
    return Gauge(scale, extra, anchor, anchored, usage_body, margin), own


def scan_history(
    messages: Sequence[BaseMessage], count: Callable[[BaseMessage], int]
) -> tuple[int, int, int]:
    """Our count of a history, where its last usage is, and our count up to it."""
    counts = [count(m) for m in messages]
    k = last_usage(messages)
    return sum(counts), k, sum(counts[: k + 1]) if k >= 0 else 0


class Scan(NamedTuple):
    """What one reading of a history finds (``full_scan``, ``Known.grow``)."""

    body: int
    """Our count of the whole history."""
    usage_at: int
    """Index of its last message with usage (-1: none)."""
    usage_body: int
    """Our count up to and including that message."""
    calls: int
    """How many assistant messages it holds (``_messages.assistant_count``)."""
    replied: bool = False
    """Whether it holds a user's reply to an answer (``_messages.holds_reply``)."""


def full_scan(
    messages: Sequence[BaseMessage], count: Callable[[BaseMessage], int]
) -> Scan:
    """``scan_history`` of ``messages``, its ``assistant_count`` and ``holds_reply``."""
    body, usage_at, usage_body = scan_history(messages, count)
    return Scan(
        body=body,
        usage_at=usage_at,
        usage_body=usage_body,
        calls=assistant_count(messages),
        replied=holds_reply(messages),
    )


@dataclass(frozen=True)
class Known:
    """The last history a guard read: its recent contents and its scan.

    ``messages[:size]`` is that history. The list is the guard's own, and may
    have grown since (``ContextGuard._read`` appends the next call's new
    messages to it rather than copying it): what it held is never changed.
    """

    messages: list[BaseMessage]
    contents: list[Any]
    """Content objects of its last messages (``_extends.recent_contents``)."""
    body: int
    usage_at: int
    usage_body: int
    calls: int = 0
    """How many assistant messages it holds (``_messages.assistant_count``)."""
    replied: bool = False
    """Whether it holds a user's reply to an answer (``_messages.holds_reply``)."""
    size: int = 0
    """How many messages it holds."""
    fields: list[dict[str, Any]] | None = None
    """Field dicts of its last messages (``_extends.recent_fields``), if known."""

    def history(self) -> list[BaseMessage]:
        """The history itself (a copy only if the list has grown since)."""
        held = self.messages
        return held if len(held) == self.size else held[: self.size]

    def grow(
        self, messages: list[BaseMessage], count: Callable[[BaseMessage], int]
    ) -> Scan:
        """``full_scan`` of a history that grows this one: its new messages only."""
        n = self.size
        new = messages[n:]
        counts = [count(m) for m in new]
        body = self.body + sum(counts)
        calls = self.calls + assistant_count(new)
        replied = self.replied or holds_reply(messages, n)
        k = last_usage(messages, n)
        if k < 0:
            usage_at, usage_body = self.usage_at, self.usage_body
        else:
            usage_at, usage_body = k, self.body + sum(counts[: k - n + 1])
        return Scan(
            body=body,
            usage_at=usage_at,
            usage_body=usage_body,
            calls=calls,
            replied=replied,
        )


def count_messages(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    *,
    anchoring: bool = True,
) -> int:
    """Tokens of a whole prompt: messages plus reply priming, usage-anchored.

    With ``anchoring``, the prefix up to the last AIMessage that carries usage counts
    as the provider reported it, and only later messages are estimated (scaled by
    how far the provider's count of that prefix was above ours).
    """
    body, usage_at, usage_body = scan_history(messages, counter.count_message)
    gauge, _ = make_gauge(
        messages,
        usage_at=usage_at,
        usage_body=usage_body,
        extra=REPLY_OVERHEAD,
        anchoring=anchoring,
    )
    return gauge.tokens(body, len(messages))
