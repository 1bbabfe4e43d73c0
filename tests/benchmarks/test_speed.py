"""A small run of the speed benchmark (``bench_prepare.py --sizes``).

The full run is slow and measures; this one only checks that every measure runs
and lands in the table (no timing is asserted).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.engine._support import agent_history

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _speed


def test_every_measure_runs_and_reaches_the_table() -> None:
    pool = agent_history(40, result_chars=20_000)
    results = _speed.run_sizes(
        pool, [60, 120], calls=30, rebuilt_max=60, conversations=4
    )
    text = _speed.table(results)
    for size in ("60", "120"):
        row = results["sizes"][size]
        assert row["warm"]["reuse"]["n"] + row["warm"]["prune"]["n"] == 30
        assert row["cold"]["prepare"]["p50"] > 0
    assert results["sizes"]["60"]["rebuilt"]["reuse"]["n"] > 0
    assert results["sizes"]["120"]["warm_32k"]["prune"]["n"] > 0
    assert "trim_messages + count_tokens_approximately" in text
    assert "a pruning call" in text
    assert results["memory"]["one_guard_mb"] > 0
    assert results["startup"]["help"]["wall_s"] > 0


def test_the_warm_breakdown_splits_every_call() -> None:
    import warm_breakdown

    pool = agent_history(40, result_chars=20_000)
    res = warm_breakdown.breakdown(pool, 60, calls=12, window=32_000)
    rows = res["rows"] + res["prunes"]
    assert len(rows) == 12 and res["rows"]
    for r in rows:
        assert abs(r["gc"] + r["encode"] + r["rest"] - r["cpu"]) < 1e-6
    assert any(r["encode"] > 0 for r in rows)  # every call has new texts
    text = warm_breakdown.report(res, "warm", slowest=2)
    assert "| encode |" in text and "alone" in text
