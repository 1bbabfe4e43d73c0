"""The loss analysis charges every lost identifier and splits the replay's bill.

Run on one real Claude Code conversation of the shared multi-tool corpus, its
figures must be the replay's own (content evidence, billed against sending
everything), each lost identifier charged once by pass, by holder and by
distance, and the bill's parts must add up to the bill.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from langchain_context_guard.replay import load_paths, replay, shared_multitool_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import loss_analysis

CORPUS = shared_multitool_dir()

pytestmark = pytest.mark.skipif(CORPUS is None, reason="no shared multi-tool data")


def test_every_loss_is_charged_and_the_parts_make_the_replays_figures() -> None:
    assert CORPUS is not None
    transcripts = load_paths([CORPUS / "cc-4a35fe98-s0.json"])
    found = loss_analysis.analyse(transcripts, 16_000, {})
    measured = replay(
        transcripts, windows=[16_000], strategies=list(loss_analysis.STRATEGIES)
    )
    rows = {r["strategy"]: r for r in measured.rows()}
    assert set(found) == set(rows)
    for strategy, row in found.items():
        assert row["content_evidence_pct"] == rows[strategy]["content_evidence_pct"]
        for part in ("lost_by_tool", "lost_by_pass", "lost_by_distance"):
            assert sum(row[part].values()) == row["evidence_lost"], (strategy, part)
        parts = sum(row["bill_vs_none"].values())
        assert parts == pytest.approx(rows[strategy]["billed_vs_none"], abs=5e-4)
    assert found["none"]["evidence_lost"] == 0
    assert found["none"]["prefix_breaks"] == 0
    assert found["guard"]["evidence_lost"] > 0
    assert found["guard"]["prefix_breaks"] > 0
    assert found["guard"]["bill_vs_none"]["re-sent"] > 0
