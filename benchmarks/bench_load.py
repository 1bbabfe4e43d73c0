"""Load: worker processes serving the steps of many threads on PostgreSQL.

``--workers`` processes (default 8) take the steps of ``--threads`` threads
(default 50) of ``--steps`` model calls each (default 100), one step at a time
and in order per thread, from a shared queue, as LangGraph Server's workers do;
``create_agent`` + ``ContextGuardMiddleware`` on ``PostgresSaver`` with a
scripted model and real tool outputs of the shared SWE transcripts
(``tests/postgres/_load.py``). A throwaway PostgreSQL server is started (as in
the tests). Reports calls over budget, bad tool pairs, lost or duplicated
messages, throughput and the guard's time per step (restore + prepare),
p50/p99. Writes JSON to ``benchmarks/results/``.

Run:  python benchmarks/bench_load.py [--workers 8 --threads 50 --steps 100]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.postgres._load import check_histories, percentile, run_load  # noqa: E402
from tests.postgres._server import start_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    server = start_server()
    try:
        url = server.create_database("load")
        steps, wall = run_load(
            url, workers=args.workers, threads=args.threads, steps=args.steps
        )
        problems = check_histories(url, args.threads, args.steps)
    finally:
        server.stop()
    guard_ms = [s.guard_seconds * 1e3 for s in steps]
    step_ms = [s.step_seconds * 1e3 for s in steps]
    order = sorted(steps, key=lambda s: (s.thread, s.n))
    handed = sum(
        a.thread == b.thread and a.worker != b.worker
        for a, b in itertools.pairwise(order)
    )
    result = {
        "workers": args.workers,
        "threads": args.threads,
        "steps_per_thread": args.steps,
        "model_calls": len(steps),
        "wall_seconds": round(wall, 1),
        "steps_per_second": round(len(steps) / wall, 2),
        "over_budget": sum(s.over_budget for s in steps),
        "bad_pairs": sum(s.bad_pairs for s in steps),
        "history_problems": problems,
        "steps_handed_to_another_worker": handed,
        "steps_that_rebuilt_the_prompt": sum(s.rebuilt for s in steps),
        "guard_ms_p50": round(percentile(guard_ms, 0.5), 2),
        "guard_ms_p99": round(percentile(guard_ms, 0.99), 2),
        "guard_ms_p50_no_rebuild": round(
            percentile(
                [g for g, s in zip(guard_ms, steps, strict=True) if not s.rebuilt]
                or [0.0],
                0.5,
            ),
            2,
        ),
        "step_ms_p50": round(percentile(step_ms, 0.5), 1),
        "step_ms_p99": round(percentile(step_ms, 0.99), 1),
    }
    print(json.dumps(result, indent=2))
    name = f"bench_load_{args.workers}x{args.threads}x{args.steps}.json"
    command = " ".join(["python", "benchmarks/bench_load.py", *sys.argv[1:]])
    doc = {"command": command, **result}
    out = ROOT / "benchmarks" / "results" / name
    out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
