"""Archives on PostgreSQL keep every thread id apart, e-mail, dotted and long ones."""

from __future__ import annotations

from langchain_context_guard.adapters._results import ResultArchive, read_result
from langchain_context_guard.compaction import Compactor, make_recall_tool
from tests.adapters.test_namespace import HOSTILE_IDS
from tests.adapters.test_namespace import _history as cut_history
from tests.compaction._support import ScriptedSummarizer, make_guard, settings
from tests.compaction.test_archive import SECRET, _secret_history
from tests.postgres._support import postgres


def test_any_thread_id_archives_and_reads_back(pg_url: str) -> None:
    with postgres(pg_url) as (_, store):
        for thread in HOSTILE_IDS:
            full, cut = cut_history(f"result of {thread!r}\n" * 10)
            config = {"configurable": {"thread_id": thread}}
            assert ResultArchive(store).save(full, cut, config) == 1
        for thread in HOSTILE_IDS:
            page = read_result(store, thread, "call_1", limit=1)
            assert page == f"[lines 0-1 of 11]\nresult of {thread!r}"


def test_any_thread_id_is_compacted_and_recalled(pg_url: str) -> None:
    with postgres(pg_url) as (_, store):
        comp = Compactor(ScriptedSummarizer(), settings(), guard=make_guard())
        recall = make_recall_tool(store)
        for thread in HOSTILE_IDS:
            comp.compact(_secret_history(), thread_id=thread, store=store)
            config = {"configurable": {"thread_id": thread}}
            assert SECRET in recall.invoke({"query": "7731-ALPHA"}, config)
