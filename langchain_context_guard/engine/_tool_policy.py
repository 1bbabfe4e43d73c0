"""``ToolPolicy``: how one tool's results are truncated and compressed.

``GuardPolicy.tool_policies`` maps a tool name to one; ``exclude_tools`` names
tools whose results are never truncated or compressed (LangChain's
``ClearToolUsesEdit`` word). A result is matched by its ``ToolMessage.name``,
which LangChain's tool nodes and ``tool.invoke(tool_call)`` set; a result with
no name follows the policy's general settings. The passes read these through
``result_caps`` and ``whole_tools``, so each rule is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from langchain_core.messages import BaseMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, Field


class ToolPolicy(BaseModel):
    """Limits for one tool's results (unset: the ``GuardPolicy``'s own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_result_chars: int | None = Field(
        None,
        ge=400,
        description="Its results longer than this are cut to head + tail, instead "
        "of at max_tool_result_chars (the cut to a share of the budget still "
        "applies). At least 400: room for the marker, a head and a tail.",
    )
    never_compress: bool = Field(
        False,
        description="Its results are never compressed, however old (the "
        "assistant message that made the call may be).",
    )


class _HasToolRules(Protocol):
    @property
    def tool_policies(self) -> Mapping[str, ToolPolicy]: ...
    @property
    def exclude_tools(self) -> tuple[str, ...]: ...


def result_caps(policy: _HasToolRules) -> dict[str, int | None]:
    """Per tool name, its results' character cap; None: never truncated."""
    caps: dict[str, int | None] = {
        name: rule.max_result_chars
        for name, rule in policy.tool_policies.items()
        if rule.max_result_chars is not None
    }
    caps.update(dict.fromkeys(policy.exclude_tools))
    return caps


def whole_tools(policy: _HasToolRules) -> frozenset[str]:
    """Names of the tools whose results are never compressed."""
    kept = {n for n, rule in policy.tool_policies.items() if rule.never_compress}
    return frozenset(kept | set(policy.exclude_tools))


def tool_name(message: BaseMessage) -> str | None:
    """The tool a result came from, by its ``name``; None for other messages."""
    return message.name if isinstance(message, ToolMessage) else None
