"""The compaction summary: its sections, its rendering, reading a model's answer.

A summary is a marked ``HumanMessage`` (a valid first turn for every provider) whose
marker stores the structured ``Summary``, so the next compaction updates it instead
of summarising a summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel, Field

from ..engine import MARKER_KEY, is_summary, marker, text_of

SECTIONS = ("completed", "remaining", "current_state", "files", "notes")
_TITLES = {
    "completed": "Completed",
    "remaining": "Remaining",
    "current_state": "Current state",
    "files": "Files and resources",
    "notes": "Notes",
}
SUMMARY_HEADER = (
    "[Context summary: earlier messages of this conversation were replaced by this "
    "summary to fit the context window. It is background for the messages that "
    "follow, not a new request.]"
)
SUMMARY_FOOTER = "Continue the task from here; do not repeat completed steps."


class SummarySections(BaseModel):
    """Working memory of an agent whose earlier conversation was compacted."""

    completed: list[str] = Field(
        default_factory=list,
        description="Concrete steps already finished, with their exact results.",
    )
    remaining: list[str] = Field(
        default_factory=list, description="Tasks and subtasks not done yet, in order."
    )
    current_state: list[str] = Field(
        default_factory=list,
        description="The state now: what was changed, key values and findings.",
    )
    files: list[str] = Field(
        default_factory=list,
        description="Files and resources read, created or modified, with what "
        "happened to each.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="Pitfalls, special handling, edge cases, user constraints.",
    )


@dataclass(frozen=True)
class Summary:
    """A compaction summary: model-written sections plus deterministic facts."""

    original_request: str = ""
    completed: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    current_state: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    turn_context: str = ""
    touched: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in the summary message's marker)."""
        data: dict[str, Any] = {k: list(getattr(self, k)) for k in SECTIONS}
        data.update(
            original_request=self.original_request,
            turn_context=self.turn_context,
            touched=list(self.touched),
        )
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """Read back what ``to_dict`` wrote; unknown keys are ignored."""

        def items(key: str) -> tuple[str, ...]:
            value = data.get(key) or ()
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return cls(
            original_request=str(data.get("original_request") or ""),
            turn_context=str(data.get("turn_context") or ""),
            touched=items("touched"),
            **{k: items(k) for k in SECTIONS},
        )

    def with_sections(self, sections: SummarySections) -> Summary:
        """A copy with the model-written sections replaced."""
        new: dict[str, Any] = {
            k: tuple(clean_items(getattr(sections, k))) for k in SECTIONS
        }
        return replace(self, **new)

    def render(self) -> str:
        """The text the model reads."""
        parts = [SUMMARY_HEADER]
        if self.original_request:
            parts.append(f"## Original request (verbatim)\n{self.original_request}")
        for key in SECTIONS:
            lines = list(getattr(self, key))
            if key == "files":
                seen = "\n".join(lines)
                lines += [t for t in self.touched if t not in seen]
            if lines:
                bullets = "\n".join(f"- {line}" for line in lines)
                parts.append(f"## {_TITLES[key]}\n{bullets}")
        if self.turn_context:
            parts.append(f"## Current turn so far\n{self.turn_context}")
        parts.append(SUMMARY_FOOTER)
        return "\n\n".join(parts)

    def is_empty(self) -> bool:
        """Whether the model wrote nothing at all."""
        return not self.turn_context and not any(getattr(self, k) for k in SECTIONS)


def read_summary(message: BaseMessage) -> Summary | None:
    """The structured summary stored on a summary message, if it is one."""
    if not is_summary(message):
        return None
    mark = marker(message) or {}
    data = mark.get("summary")
    if isinstance(data, Mapping):
        return Summary.from_dict(data)
    return Summary(notes=(text_of(message.content),))


def last_summary(messages: Sequence[BaseMessage]) -> BaseMessage | None:
    """The newest summary message in ``messages``."""
    return next((m for m in reversed(messages) if is_summary(m)), None)


_TAG = re.compile(
    r"<(completed|remaining|current_state|files|notes)>(.*?)</\1>", re.S | re.I
)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s*|\*\*)(.+?)(?:\*\*)?\s*:?\s*$")
_ALIASES = {
    "completed": "completed",
    "done": "completed",
    "remaining": "remaining",
    "next steps": "remaining",
    "todo": "remaining",
    "current state": "current_state",
    "current_state": "current_state",
    "state": "current_state",
    "files": "files",
    "files and resources": "files",
    "resources": "files",
    "notes": "notes",
}
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\[[ xX]\])\s*")
_NONE = frozenset({"none", "(none)", "n/a", "-", "nothing"})


def clean_items(lines: Iterable[str]) -> list[str]:
    """Strip bullets and blank or 'none' lines."""
    out: list[str] = []
    for line in lines:
        for part in str(line).splitlines():
            item = _BULLET.sub("", part).strip()
            if item and item.lower().rstrip(".") not in _NONE:
                out.append(item)
    return out


def has_sections(text: str) -> bool:
    """Whether ``text`` holds at least one of the summary's sections.

    An XML-tagged section, or a markdown heading naming one (``## Completed``);
    loose text is not a summary, whatever it says.
    """
    if _TAG.search(text):
        return True
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and heading.group(1).strip().lower() in _ALIASES:
            return True
    return False


def parse_sections(text: str) -> SummarySections:
    """Read a text answer: XML-tagged sections, else markdown headings, else notes."""
    found: dict[str, list[str]] = {}
    for match in _TAG.finditer(text):
        found.setdefault(match.group(1).lower(), []).extend(
            clean_items(match.group(2).splitlines())
        )
    if not found:
        current: str | None = None
        loose: list[str] = []
        for line in text.splitlines():
            heading = _HEADING.match(line)
            key = _ALIASES.get(heading.group(1).strip().lower()) if heading else None
            if key is not None:
                current = key
                found.setdefault(key, [])
            elif current is not None:
                found[current].extend(clean_items([line]))
            else:
                loose.extend(clean_items([line]))
        if not found:
            found = {"notes": loose}
    return SummarySections(**found)


def summary_message(summary: Summary, *, number: int, **info: Any) -> HumanMessage:
    """The summary as a marked user message (valid first turn for every provider)."""
    return HumanMessage(
        summary.render(),
        id=f"context-guard-summary-{number}",
        additional_kwargs={
            MARKER_KEY: {
                "kind": "summary",
                "number": number,
                "summary": summary.to_dict(),
                **info,
            }
        },
    )
