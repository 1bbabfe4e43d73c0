"""Writing tools that outdate older reads (``ToolPolicy.write_key``), measured.

Replays the Claude Code conversations of the multi-tool corpus (the family with
Read, Write and Edit), each half by name on its own, at 16k and 32k, with the
guard's defaults, the suggested ranged ``Read`` policy, and that policy with
``Write`` (and ``Edit``) as writers whose successful calls outdate older reads
of the file. docs/configuration.md quotes the figures.

    CONTEXT_GUARD_OFFLINE=1 python benchmarks/write_policies.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_benchmark import SWEEP_WINDOWS, _machine, families, run

from langchain_context_guard.replay import format_table
from langchain_context_guard.replay._transcripts import shared_multitool_dir

COMMAND = "CONTEXT_GUARD_OFFLINE=1 python benchmarks/write_policies.py"
OUT = Path(__file__).resolve().parent / "results" / "write_policies.json"
RANGED = {"supersede_key": ["file_path", "offset", "limit"]}
VARIANTS: dict[str, dict[str, Any]] = {
    "Read by range": {"tool_policies": {"Read": RANGED}},
    "+ Write outdates": {
        "tool_policies": {"Read": RANGED, "Write": {"write_key": "file_path"}}
    },
    "+ Write, Edit outdate": {
        "tool_policies": {
            "Read": RANGED,
            "Write": {"write_key": "file_path"},
            "Edit": {"write_key": "file_path"},
        }
    },
}


def main() -> int:
    data = shared_multitool_dir()
    if data is None:
        print("no shared multi-tool transcripts (../shared/data/multitool)")
        return 1
    names = families(data)["claude-code"]
    cut = len(names) // 2
    start = time.perf_counter()
    out: dict[str, Any] = {"command": COMMAND, "machine": _machine()}
    out["variants"] = VARIANTS
    out["halves"] = {}
    for part, chosen in {"first": names[:cut], "last": names[cut:]}.items():
        result = run(
            data,
            ["guard", *VARIANTS],
            feedback=True,
            jobs=2,
            variants=VARIANTS,
            windows=SWEEP_WINDOWS,
            names=chosen,
        )
        print(f"\n## claude-code, {part}: {len(chosen)}\n\n{format_table(result)}")
        out["halves"][part] = {"transcripts": chosen, "results": result.rows()}
    out["seconds"] = round(time.perf_counter() - start, 1)
    OUT.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\nwrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
