"""A compaction the agent's model asks for: the ``compact_context`` tool.

``make_compaction_tool`` gives the model a tool to ask for a compaction now,
with instructions for the summary. The tool itself only acknowledges; the
request is read back from the history: when the newest assistant message
called the tool and its result is in, ``requested_compaction`` returns the
instructions and ``CompactionMiddleware(compaction_tool=True)`` compacts before
the next model call, whatever the trigger says, with the instructions added to
the summary prompt (``focus``). Read from the history, a request survives a
checkpoint and a restart, and is honoured once: the next model call writes a
newer assistant message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from ..engine import quote

COMPACTION_TOOL = "compact_context"
"""The name of the compaction-request tool."""
MAX_REQUEST_CHARS = 1_000
"""Characters of the model's instructions the summary prompt takes, at most."""
_TAG = re.compile(r"<(?=\s*/?\s*request)", re.IGNORECASE)
ACKNOWLEDGED = (
    "Compaction requested: before your next step the earlier conversation is "
    "replaced by a summary (with your instructions); the recent messages stay "
    "verbatim."
)


def make_compaction_tool(name: str = COMPACTION_TOOL) -> BaseTool:
    """The tool with which the model asks for a compaction now."""

    def compact_context(instructions: str = "") -> str:
        return ACKNOWLEDGED

    return StructuredTool.from_function(
        compact_context,
        name=name,
        description="Ask for the earlier conversation to be summarised now, to "
        "free room in your context: call it after finishing a phase of the work, "
        "before starting an unrelated one. `instructions`: what the summary must "
        "keep (names, numbers, decisions); the recent messages stay verbatim.",
    )


def requested_compaction(
    messages: Sequence[BaseMessage], name: str = COMPACTION_TOOL
) -> str | None:
    """The instructions of a compaction asked for by the newest assistant message.

    None when it did not call the tool, or the tool's result is not in yet.
    """
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if not isinstance(message, AIMessage):
            return None
        for call in message.tool_calls:
            if call["name"] == name and call["id"] in answered:
                return str(call["args"].get("instructions") or "")
        return None
    return None


def focus(configured: str | None, requested: str | None) -> str | None:
    """The summary's extra instructions: the settings', then the model's request."""
    if requested is None:
        return configured
    text = _TAG.sub("&lt;", quote(requested.strip()[:MAX_REQUEST_CHARS]))
    asked = "The agent asked for this summary itself"
    if text:
        asked += f", with these instructions:\n<request>\n{text}\n</request>"
    else:
        asked += "."
    return f"{configured}\n\n{asked}" if configured else asked
