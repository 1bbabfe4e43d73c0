"""Billed input per provider over the shared transcripts (BENCHMARKS.md).

Run: ``CONTEXT_GUARD_OFFLINE=1 python benchmarks/pricing.py`` (about 25 s).
"""

from __future__ import annotations

import time

from langchain_context_guard.replay import load_trajectories, shared_trajectory_dir
from langchain_context_guard.replay._pricing import format_pricing, price_replay


def main() -> None:
    directory = shared_trajectory_dir()
    if directory is None:
        raise SystemExit("the shared transcripts are missing (../shared/data)")
    start = time.perf_counter()
    rows = price_replay(load_trajectories(directory), windows=(16_000, 32_000))
    print(format_pricing(rows))
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
