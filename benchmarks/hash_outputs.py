"""One hash of what ``prepare`` gives over many warm calls, to compare two versions.

One guard per window (32k, 16k, 128k) takes the shared trajectories' history of
``size`` messages grown by one agent step per call, ``calls`` times; the hash covers
every call's messages (as dicts) and report. Run it on two checkouts (``PYTHONPATH``
set to each) to check that a speed change left the outputs byte-identical.

Run:  python benchmarks/hash_outputs.py [size] [calls]     (default 3000 150)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _speed
from bench_prepare import load_pool
from langchain_core.messages import messages_to_dict

import langchain_context_guard
from langchain_context_guard import ContextGuard


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    pool = _speed.grow_pool(load_pool(), size + 2 * calls + 2)
    digest = hashlib.sha256()
    pruned = 0
    for window in ((32_000, 4_000), (16_000, 2_000), (128_000, 8_000)):
        guard = ContextGuard(_speed.policy(*window))
        for i in range(calls):
            result = guard.prepare(pool[: size + 2 * i])
            dicts = messages_to_dict(result.messages)
            digest.update(json.dumps(dicts, sort_keys=True, default=str).encode())
            digest.update(repr(result.report).encode())
            pruned += any(e.kind in _speed.PRUNING for e in result.report.events)
    print(langchain_context_guard.__file__)
    print(f"{3 * calls} calls, {pruned} pruning: {digest.hexdigest()}")


if __name__ == "__main__":
    main()
