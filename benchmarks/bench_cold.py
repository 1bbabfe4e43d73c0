"""Cold ``prepare`` against tiktoken's encode of the same texts, alone.

``_speed.cold`` at each size: a fresh guard on the shared trajectories' history
against ``encode_ordinary_batch`` and against the same texts in a few chunks on
the same threads, process CPU time on both sides. Set ``PYTHONPATH`` to another
checkout to measure it in the same conditions (as ``hash_outputs.py``), and
alternate the two to put them under the same load. ``--write`` puts the rows
into ``results/bench_speed.json`` in place of its cold rows, and records this
command and the machine's load there (``render.py`` shows both).

Run:  python benchmarks/bench_cold.py [--sizes 1000,50000] [--reps 7] [--write]
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
from bench_prepare import RESULTS, load_pool, machine

import langchain_context_guard
from langchain_context_guard import ContextGuard


def main() -> None:
    """Print one JSON line per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000", help="comma-separated sizes")
    parser.add_argument("--reps", type=int, default=7, help="repeats up to 10,000")
    parser.add_argument(
        "--write", action="store_true", help="replace bench_speed.json's cold rows"
    )
    args = parser.parse_args()
    logging.getLogger("langchain_context_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_context_guard").propagate = False
    sizes = [int(s) for s in args.sizes.split(",")]
    big = _speed.grow_pool(load_pool(), max(sizes))
    ContextGuard(_speed.policy()).prepare(big[:4])  # load the tokenizer
    tree = str(Path(langchain_context_guard.__file__).parent.parent)
    rows = {}
    start = machine()
    for n in sizes:
        load = os.getloadavg()
        reps = args.reps if n <= 10_000 else 1
        rows[str(n)] = row = _speed.cold(big[:n], reps)
        # The table's ratio column, for these rows, from the same run.
        row["trim_approx"] = _speed.trim_reference(big[:n], reps)
        print(json.dumps({"tree": tree, "messages": n, "load": load, **row}))
    if args.write:
        command = " ".join(["python", "benchmarks/bench_cold.py", *sys.argv[1:]])
        write(rows, command, start)


def write(
    rows: dict[str, dict[str, object]], command: str, start: dict[str, object]
) -> None:
    """Put ``rows`` in ``bench_speed.json`` as its sizes' cold rows."""
    path = RESULTS / "bench_speed.json"
    doc = json.loads(path.read_text())
    for size, row in rows.items():
        doc["sizes"][size]["cold"] = row
    start["loadavg_end"] = os.getloadavg()
    doc["cold"] = {"command": command, "sizes": list(rows), "machine": start}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote the cold rows of {path}")


if __name__ == "__main__":
    main()
