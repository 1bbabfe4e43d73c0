"""Compaction: an LLM summary in fixed sections that rebuilds the history.

``Compactor`` plans which old turns to summarise (``_plan``), asks the injected
chat model for the sections (``_summarizer``: a whole summary, a long range in
parts merged by ``_chunks``; ``_calls``: one call and its prompt from
``_summary_prompt``; ``_answer`` refuses a reply that is not a summary),
archives what it removed (``_archive``) and rebuilds the messages; with
``background_at`` the summary is prepared ahead of the trigger (``_background``);
``_request`` lets the agent's model ask for a compaction now.
``add_compaction`` makes it a LangGraph branch, ``CompactionMiddleware`` a
``create_agent`` middleware (needs the ``agents`` extra, loads on first use).
Imports the engine and ``adapters``.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._calls import SUMMARIZER_TAGS, SerializedSummaryWarning
from ._compactor import Compactor, acompact_messages, compact_messages
from ._core import CompactionResult
from ._graph import (
    ARCHIVE_NS,
    add_compaction,
    archive_namespace,
    compaction_node,
    compaction_router,
    make_recall_tool,
    recall_messages,
)
from ._plan import CompactionPlan, Mode
from ._request import make_compaction_tool
from ._settings import CompactionSettings
from ._summary import Summary, SummarySections
from ._trigger import ContextSize

if TYPE_CHECKING:
    from ._middleware import CompactionMiddleware

__getattr__ = lazy_getattr(__name__, {"CompactionMiddleware": "._middleware"})

__all__ = [
    "ARCHIVE_NS",
    "SUMMARIZER_TAGS",
    "CompactionMiddleware",
    "CompactionPlan",
    "CompactionResult",
    "CompactionSettings",
    "Compactor",
    "ContextSize",
    "Mode",
    "SerializedSummaryWarning",
    "Summary",
    "SummarySections",
    "acompact_messages",
    "add_compaction",
    "archive_namespace",
    "compact_messages",
    "compaction_node",
    "compaction_router",
    "make_compaction_tool",
    "make_recall_tool",
    "recall_messages",
]
