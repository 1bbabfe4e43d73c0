"""Cold ``prepare`` against tiktoken's encode of the same texts, alone.

``_speed.cold`` at each size: a fresh guard on the shared trajectories' history
against ``encode_ordinary_batch`` and against the same texts in a few chunks on
the same threads, process CPU time on both sides. Set ``PYTHONPATH`` to another
checkout to measure it in the same conditions (as ``hash_outputs.py``), and
alternate the two to put them under the same load.

Run:  python benchmarks/bench_cold.py [--sizes 1000,50000] [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _speed
from bench_prepare import load_pool

import langchain_context_guard
from langchain_context_guard import ContextGuard


def main() -> None:
    """Print one JSON line per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000", help="comma-separated sizes")
    parser.add_argument("--reps", type=int, default=7, help="repeats up to 10,000")
    args = parser.parse_args()
    logging.getLogger("langchain_context_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_context_guard").propagate = False
    sizes = [int(s) for s in args.sizes.split(",")]
    big = _speed.grow_pool(load_pool(), max(sizes))
    ContextGuard(_speed.policy()).prepare(big[:4])  # load the tokenizer
    tree = str(Path(langchain_context_guard.__file__).parent.parent)
    for n in sizes:
        row = _speed.cold(big[:n], args.reps if n <= 10_000 else 1)
        print(json.dumps({"tree": tree, "messages": n, "load": os.getloadavg(), **row}))


if __name__ == "__main__":
    main()
