"""Time only the pruning calls of a long conversation (target: <= 300 ms at 50k).

One guard on a 32k window (so it prunes every few steps) takes a history of
``--size`` messages (the shared trajectories, repeated with fresh ids as in
``_speed.grow_pool``), then grows it by one agent step per call for ``--calls``
calls. Calls that prune (they run the passes: a trim, compress, digest or
strip_thinking event) are timed apart from the ones that re-send the previous
prompt, in the calling thread's CPU time (``time.thread_time``; the machine is
shared) with wall time beside it. ``--profile`` prints a cProfile of the pruning
calls alone (each call is profiled; only pruning calls' profiles are kept).

Run:  python benchmarks/bench_prune.py [--size 50000] [--calls 400] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _speed
from bench_prepare import load_pool

from langchain_context_guard import ContextGuard


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    pool = _speed.grow_pool(load_pool(), args.size + 2 * args.calls + 2)
    guard = ContextGuard(_speed.policy(32_000, 4_000))
    start = time.perf_counter()
    guard.prepare(pool[: args.size])
    print(f"first call (cold) at {args.size:,}: {time.perf_counter() - start:.1f} s")
    gc.collect()  # the setup's garbage, as in _speed.warm
    pause = [0.0, 0.0]  # the collector's CPU ms in the current call, its start
    full = [0]  # full collections in the current call

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            pause[1] = time.thread_time()
            return
        pause[0] += (time.thread_time() - pause[1]) * 1000
        full[0] += info["generation"] == 2

    gc.callbacks.append(collector)
    in_gc: list[tuple[float, int]] = []
    cpu: dict[str, list[float]] = {"reuse": [], "prune": []}
    wall: dict[str, list[float]] = {"reuse": [], "prune": []}
    profiles: list[cProfile.Profile] = []
    for i in range(args.calls):
        history = pool[: args.size + 2 * (i + 1)]
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        pause[0], full[0] = 0.0, 0
        result, c, w = _speed.timed(lambda h=history: guard.prepare(h))
        if profiler is not None:
            profiler.disable()
        pruned = any(e.kind in _speed.PRUNING for e in result.report.events)
        kind = "prune" if pruned else "reuse"
        cpu[kind].append(c)
        wall[kind].append(w)
        if pruned:
            in_gc.append((round(pause[0], 1), full[0]))
        if pruned and profiler is not None:
            profiles.append(profiler)
    for kind in ("prune", "reuse"):
        s = _speed.stats(cpu[kind], wall[kind])
        print(f"{kind}: {s}")
    print("pruning calls, CPU ms:", [round(c, 1) for c in cpu["prune"]])
    print("of which in the garbage collector (ms, full collections):", in_gc)
    print(f"load average: {os.getloadavg()}")
    if profiles:
        out = io.StringIO()
        stats = pstats.Stats(profiles[0], stream=out)
        for p in profiles[1:]:
            stats.add(p)
        out.write(f"{len(profiles)} pruning calls\n")
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(45)
        print(out.getvalue())


if __name__ == "__main__":
    main()
