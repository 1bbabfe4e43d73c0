"""``ToolPolicy``: how one tool's results are truncated and compressed.

``GuardPolicy.tool_policies`` maps a tool name to one; ``exclude_tools`` names
tools whose results are never truncated or compressed (LangChain's
``ClearToolUsesEdit`` word). A result is matched by its ``ToolMessage.name``,
which LangChain's tool nodes and ``tool.invoke(tool_call)`` set; a result with
no name follows the policy's general settings (a superseded read is matched by
its tool call's name, which holds the key argument). The passes read these
through ``result_caps``, ``whole_tools``, ``tool_keeps``, ``supersede_keys``
and ``last_tools``, so each rule is written once.
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
    keep_recent: int | None = Field(
        None,
        ge=0,
        description="How many of its newest results stay whole, counted among "
        "its own results (older ones are compressed in batches of "
        "compress_batch of its own). Unset: keep_recent_tool_results, counted "
        "over all results.",
    )
    supersede_key: str | None = Field(
        None,
        min_length=1,
        description="The argument naming what a call reads (e.g. 'path' for "
        "read_file; 'command' for a shell: the same command run again). Once a "
        "later call of this tool has the same value, the older result is "
        "replaced by a pointer to the newer call, when results are compressed, "
        "and no longer counts among the newest kept whole. Unset: never (nor "
        "with never_compress or exclude_tools).",
    )
    drop_last: bool = Field(
        False,
        description="Its calls and their results are dropped last: when the "
        "trim must drop history, every other droppable message goes first "
        "(history_limit too leaves them), and these only when what is left "
        "still does not fit, oldest first like the rest.",
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


def tool_keeps(policy: _HasToolRules) -> dict[str, int]:
    """Per tool name, how many of its own newest results stay whole (if set)."""
    return {
        name: rule.keep_recent
        for name, rule in policy.tool_policies.items()
        if rule.keep_recent is not None
    }


def supersede_keys(policy: _HasToolRules) -> dict[str, str]:
    """Per tool name, the argument whose repeat supersedes an older result."""
    return {
        name: rule.supersede_key
        for name, rule in policy.tool_policies.items()
        if rule.supersede_key is not None
    }


def last_tools(policy: _HasToolRules) -> frozenset[str]:
    """Names of the tools whose calls the trim drops last."""
    return frozenset(n for n, rule in policy.tool_policies.items() if rule.drop_last)


def tool_name(message: BaseMessage) -> str | None:
    """The tool a result came from, by its ``name``; None for other messages."""
    return message.name if isinstance(message, ToolMessage) else None
