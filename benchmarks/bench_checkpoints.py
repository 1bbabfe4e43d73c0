"""Checkpoint storage of a long agent run, with and without the guard.

One thread of ``steps`` tool calls (results of 2-6 KB, so the 20k-token window
is pruned every few steps) run by ``create_agent`` and by ``create_react_agent``
on SQLite (``SqliteSaver``, file size) and PostgreSQL (``PostgresSaver``, size
of the checkpoint tables; a throwaway server as in the tests), for each adapter
mode. Prints a Markdown table and writes JSON to ``benchmarks/results/``.

Run:  python benchmarks/bench_checkpoints.py [--steps 200] [--backends sqlite,postgres]
      [--only create_react_agent]   (variants whose name has it, and the baselines)
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore", category=DeprecationWarning)

from langchain.agents import create_agent  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

from langchain_context_guard import ContextGuard, GuardPolicy  # noqa: E402
from langchain_context_guard.adapters import (  # noqa: E402
    ContextGuardMiddleware,
    GuardedAgentState,
    guarded_model,
    pre_model_hook,
)
from tests.adapters._support import RESERVE, SYSTEM, WINDOW, read_note  # noqa: E402
from tests.fakes import ScriptedToolModel  # noqa: E402

TOOLS = [read_note]
Build = Callable[[ScriptedToolModel, Any], Any]


def _guard() -> ContextGuard:
    return ContextGuard(
        GuardPolicy(
            context_window=WINDOW, reserve_tokens=RESERVE, warn_below_tokens=16_000
        )
    )


def _agent(middleware: list[Any]) -> Build:
    return lambda model, saver: create_agent(
        model, TOOLS, system_prompt=SYSTEM, middleware=middleware, checkpointer=saver
    )


def _react(mode: str | None, schema: Any = None) -> Build:
    def build(model: ScriptedToolModel, saver: Any) -> Any:
        hook = (
            None
            if mode is None
            else pre_model_hook(_guard(), mode=mode, tools=TOOLS, system_prompt=SYSTEM)  # type: ignore[arg-type]
        )
        extra = {"state_schema": schema} if schema is not None else {}
        return create_react_agent(
            model,
            TOOLS,
            prompt=SYSTEM,
            pre_model_hook=hook,
            checkpointer=saver,
            **extra,
        )

    return build


VARIANTS: dict[str, Build] = {
    "create_agent, no guard": _agent([]),
    "create_agent + middleware (default)": lambda m, s: _agent(
        [ContextGuardMiddleware(_guard())]
    )(m, s),
    "create_agent + middleware persist=True": lambda m, s: _agent(
        [ContextGuardMiddleware(_guard(), persist=True)]
    )(m, s),
    "create_react_agent, no guard": _react(None),
    "create_react_agent + hook llm_input (AgentState)": _react("llm_input"),
    "create_react_agent + hook llm_input (GuardedAgentState)": _react(
        "llm_input", GuardedAgentState
    ),
    "create_react_agent + hook persist": _react("persist"),
    "create_react_agent + guarded_model": lambda m, s: create_react_agent(
        guarded_model(_guard(), m, tools=TOOLS),
        TOOLS,
        prompt=SYSTEM,
        checkpointer=s,
    ),
}


def _run(build: Build, saver: Any, steps: int) -> float:
    model = ScriptedToolModel(steps=steps, tool_name="read_note")
    agent = build(model, saver)
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 10 * steps}
    start = time.perf_counter()
    agent.invoke({"messages": [("user", "Read the notes.")]}, config)
    return time.perf_counter() - start


def sqlite_row(build: Build, steps: int, tmp: Path, n: int) -> dict[str, Any]:
    path = tmp / f"v{n}.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    seconds = _run(build, SqliteSaver(conn), steps)
    checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    conn.close()
    return {"checkpoints": checkpoints, "bytes": path.stat().st_size, "s": seconds}


def postgres_row(build: Build, steps: int, server: Any, n: int) -> dict[str, Any]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    url = server.create_database(f"v{n}")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        seconds = _run(build, saver, steps)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM FULL")
        checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        size = conn.execute(
            "SELECT sum(pg_total_relation_size(t)) FROM unnest(ARRAY["
            "'checkpoints', 'checkpoint_blobs', 'checkpoint_writes']) AS t"
        ).fetchone()[0]
    return {"checkpoints": checkpoints, "bytes": int(size), "s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--only", default="", help="run only variants whose name contains this"
    )
    args = parser.parse_args()
    backends = args.backends.split(",")
    results: dict[str, dict[str, Any]] = {}
    server = None
    if "postgres" in backends:
        from tests.postgres._server import start_server

        server = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, (name, build) in enumerate(VARIANTS.items()):
                if args.only not in name and not name.endswith("no guard"):
                    continue
                row: dict[str, Any] = {}
                if "sqlite" in backends:
                    row["sqlite"] = sqlite_row(build, args.steps, Path(tmp), n)
                if server is not None:
                    row["postgres"] = postgres_row(build, args.steps, server, n)
                results[name] = row
                print(name, json.dumps(row), flush=True)
    finally:
        if server is not None:
            server.stop()
    _table(results, backends, args.steps)
    tag = f"_{args.only.replace(' ', '_')}" if args.only else ""
    out = ROOT / "benchmarks" / "results" / f"bench_checkpoints_{args.steps}{tag}.json"
    command = " ".join(["python", "benchmarks/bench_checkpoints.py", *sys.argv[1:]])
    doc = {"command": command, "variants": results}  # benchmarks/render.py reads it
    out.write_text(json.dumps(doc, indent=2) + "\n")


def _table(results: dict[str, dict[str, Any]], backends: list[str], steps: int) -> None:
    print(f"\n{steps} tool steps, one thread\n")
    head = "| variant |" + "".join(
        f" {b} checkpoints | {b} MB | vs no guard |" for b in backends
    )
    print(head)
    print("|---|" + "---:|---:|---:|" * len(backends))
    for name, row in results.items():
        base = results[
            "create_agent, no guard"
            if name.startswith("create_agent")
            else "create_react_agent, no guard"
        ]
        cells = ""
        for b in backends:
            r = row[b]
            ratio = r["bytes"] / base[b]["bytes"] - 1
            cells += f" {r['checkpoints']} | {r['bytes'] / 1e6:.1f} | {ratio:+.1%} |"
        print(f"| {name} |{cells}")


if __name__ == "__main__":
    main()
