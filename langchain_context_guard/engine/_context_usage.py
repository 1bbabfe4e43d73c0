"""``ContextUsage``: a prompt's tokens by what they are (``tokens._usage``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ._messages import MARKER_KEY

Category = Literal[
    "system",
    "tools",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "reasoning",
    "notes",
    "images",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
"""The categories, in the order they are reported."""


@dataclass(frozen=True)
class ContextUsage:
    """Tokens of one prompt by category, and its share of the context window.

    ``notes`` are the messages the guard wrote in place of others (summaries,
    the digest of dropped turns, placeholder first turns); ``tools`` the tool
    schemas. The categories add up to ``total``.
    """

    system: int = 0
    tools: int = 0
    user: int = 0
    assistant: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    reasoning: int = 0
    notes: int = 0
    images: int = 0
    messages: int = 0
    """How many messages were measured."""
    window: int = 0
    """The context window the share is of (0: unknown)."""

    @property
    def total(self) -> int:
        """All categories together."""
        return sum(getattr(self, name) for name in CATEGORIES)

    @property
    def share(self) -> float:
        """``total`` as a fraction of ``window`` (0.0 when the window is unknown)."""
        return self.total / self.window if self.window > 0 else 0.0

    def by_category(self) -> dict[Category, int]:
        """The categories' tokens, in reporting order."""
        return {name: getattr(self, name) for name in CATEGORIES}

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict: the categories, ``total``, ``window`` and ``share``."""
        return {**asdict(self), "total": self.total, "share": round(self.share, 4)}

    def describe(self) -> str:
        """One line: the total, its share, and the non-empty categories."""
        parts = [
            f"{n.replace('_', ' ')} {v:,}" for n, v in self.by_category().items() if v
        ]
        head = f"{self.total:,} tokens"
        if self.window:
            head += f" ({self.share:.0%} of {self.window:,})"
        return f"{head}: {', '.join(parts) or 'empty'}"


def usage_notice(
    usage: ContextUsage, fractions: Sequence[float], last: BaseMessage | None
) -> HumanMessage | None:
    """A note for the model once ``usage`` passes one of ``fractions`` of the window.

    It names the highest fraction passed, so its text changes only when a new
    one is passed (the prompt before it stays cacheable), and is marked
    ``usage_notice``. None below the lowest fraction, without a window, or when
    the prompt ends with an assistant message (a note there would be a new
    user turn).
    """
    passed = [f for f in fractions if usage.share >= f]
    if not passed or usage.window <= 0 or isinstance(last, AIMessage):
        return None
    text = (
        f"[Context note: over {max(passed):.0%} of your {usage.window:,}-token "
        "context window is in use; older tool output may be shortened or dropped. "
        "Keep what you still need in your replies.]"
    )
    mark = {"kind": "usage_notice", "share": round(usage.share, 4)}
    return HumanMessage(text, additional_kwargs={MARKER_KEY: mark})
