"""``ContextUsage``: a prompt's tokens by what they are (``tokens._usage``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

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
CATEGORIES: tuple[Category, ...] = (
    "system",
    "tools",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "reasoning",
    "notes",
    "images",
)
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
