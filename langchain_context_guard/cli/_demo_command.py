"""``context-guard demo``: pick a model, run the demo agent, show progress, report."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from ..engine import ContextGuard
from ._demo import FACT_FILE, CallRecord, DemoResult, run_demo
from ._options import CommandError, load_policy, warn_default_window

DEMO_DEFAULTS = {"context_window": 32_000}  # reserve: GuardPolicy.reserve's rule
# (environment variable, provider package, init_chat_model spec)
PROVIDERS = (
    ("OPENAI_API_KEY", "langchain_openai", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "langchain_anthropic", "anthropic:claude-3-5-haiku-latest"),
)
BAR = 24


def choose_model(
    spec: str, environ: Mapping[str, str] | None = None
) -> tuple[Any, str]:
    """The chat model for ``--model`` (None: scripted) and a line saying why."""
    env = os.environ if environ is None else environ
    if spec == "scripted":
        return None, "model: scripted (offline, deterministic)"
    if spec != "auto":
        return _init(spec), f"model: {spec}"
    missing = []
    for var, package, default in PROVIDERS:
        if not env.get(var):
            continue
        if importlib.util.find_spec(package) is None:
            missing.append(
                f"{var} is set but {package.replace('_', '-')} is not installed"
            )
            continue
        return _init(default), f"model: {default} (from {var})"
    why = "; ".join(missing) or "no OPENAI_API_KEY or ANTHROPIC_API_KEY"
    return None, f"model: scripted, offline ({why})"


def _init(spec: str) -> Any:
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec, temperature=0)
    except (ImportError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CommandError(f"--model {spec}: {first}") from None


def run_demo_command(ns: argparse.Namespace) -> int:
    """Run ``demo`` from parsed arguments; returns the exit code."""
    if ns.steps < 1:
        raise CommandError(f"--steps must be at least 1, got {ns.steps}")
    flags = {"context_window": ns.window, "reserve_tokens": ns.reserve}
    policy = load_policy(config=ns.config, flags=flags, defaults=DEMO_DEFAULTS)
    db: Path = ns.db
    if db.exists() and db.stat().st_size and not _is_sqlite(db):
        raise CommandError(f"--db {db}: exists and is not a SQLite database")
    _check_db(db)
    model, why = choose_model(ns.model)
    guard = ContextGuard(policy, model=model)
    window = guard.window()  # refuses tiny windows early
    if ns.model not in {"auto", "scripted"}:
        warn_default_window(ns.model, window.tokens, window.source)
    budget = guard.budget(model, window=window.tokens)  # as the middleware counts
    quiet = bool(ns.json)
    print(why, file=sys.stderr if quiet else sys.stdout)
    if not quiet:
        print(
            f"window {window.tokens:,} tokens, reserve {window.tokens - budget:,}: "
            f"budget {budget:,} tokens per call"
        )
        print(f"task: up to {ns.steps} tool calls over a generated repository\n")
    on_call = None if quiet else _progress(budget)
    try:
        result = run_demo(policy, steps=ns.steps, db=db, model=model, on_call=on_call)
    except (OSError, sqlite3.OperationalError) as exc:
        raise CommandError(
            f"--db {db}: cannot open ({exc}); choose a writable path"
        ) from None
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"--db {db}: {_unusable(exc)}") from None
    print(json.dumps(result.to_dict(), indent=2) if quiet else report(result))
    return 0


def _check_db(db: Path) -> None:
    """Raise ``CommandError`` when an existing ``db`` is a damaged SQLite file."""
    if not db.exists() or not db.stat().st_size:
        return
    try:
        uri = f"{db.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            problems = conn.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"--db {db}: {_unusable(exc)}") from None
    if problems and problems[0] != "ok":  # SQLite's own words are several lines
        why = _unusable("database disk image is malformed")
        raise CommandError(f"--db {db}: {why}")


def _unusable(why: object) -> str:
    return f"not a usable SQLite database ({why}); delete it or choose another path"


def _is_sqlite(path: Path) -> bool:
    from ._inspect import is_sqlite

    return is_sqlite(path)


def _progress(budget: int) -> Any:
    def show(call: CallRecord) -> None:
        filled = min(BAR, round(BAR * call.tokens_with / budget)) if budget else 0
        bar = "#" * filled + "." * (BAR - filled)
        events = ", ".join(dict.fromkeys(call.events))
        print(
            f"call {call.index:>3}  [{bar}] {call.tokens_with:>7,} tokens sent"
            f"  (without guard {call.tokens_without:>8,})"
            + (f"  {events}" if events else ""),
            flush=True,
        )

    return show


def early_fact(result: DemoResult) -> str:
    """What became of the rounding rule read early on, in one line."""
    if result.fact_status == "never read":
        return f"{FACT_FILE} was never read"
    said = f"the rounding rule in {FACT_FILE}, read at call {result.fact_read_at}: "
    dropped = f"pruned from the input from call {result.fact_dropped_at}"
    status = {
        "kept": "still in the final call's input",
        "read back": f"{dropped}; the agent read it back at call "
        f"{result.read_back_at}, so the final call had it",
        "lost": f"{dropped}, not read back: the final call did not have it",
    }[result.fact_status]
    quoted = "quotes" if result.answer_quotes_fact else "does not quote"
    return f"{said}{status}; the answer {quoted} it"


_EVENTS = {
    "compaction": "the history summarised, the old messages archived",
    "reuse": "the previous prompt re-sent unchanged plus the new messages: "
    "the provider's prompt cache hits",
    "truncate": "huge tool outputs cut to their head and tail",
    "compress": "old tool results shrunk to a few lines",
    "trim": "the oldest whole turns dropped",
    "digest": "a note of the dropped turns' tool calls",
    "strip_thinking": "old reasoning removed",
    "repair": "tool calls and results paired again",
    "compaction_failed": "a summary failed; the history was pruned instead",
}
"""What each event in the report means, in plain words."""
_SOURCES = {
    "override": "as set (--window)",
    "model_profile": "from the model's profile",
    "table": "from the built-in table of models",
    "default": "the default (set --window)",
    "learned": "learned from a provider's error",
}
"""Where the window came from, in plain words (``WindowInfo.source``)."""


def report(result: DemoResult) -> str:
    """The end-of-run report."""
    n = len(result.calls)
    events = "; ".join(
        f"{k} {v} ({_EVENTS.get(k, 'a change the guard made')})"
        for k, v in result.events.items()
    )
    fits = (
        f"all {n} calls within budget"
        if result.over_budget == 0
        else f"{result.over_budget} of {n} calls OVER budget"
    )
    rows = [
        ("model calls", f"{n} ({result.model})"),
        (
            "middlewares",
            "CompactionMiddleware (summarises the history once it passes its "
            "trigger), ContextGuardMiddleware (fits every prompt to the budget)",
        ),
        (
            "window / budget",
            f"{result.context_window:,} / {result.budget:,} tokens "
            f"(reserve {result.reserve_tokens:,}; window "
            f"{_SOURCES.get(result.window_source, 'from ' + result.window_source)})",
        ),
        ("with the guard", fits),
        ("without it", f"{result.over_budget_without} of {n} calls over budget"),
        (
            "peak context",
            f"{result.peak_with:,} tokens with the guard, "
            f"{result.peak_without:,} without",
        ),
        (
            "total input",
            f"{result.total_with:,} tokens with the guard, "
            f"{result.total_without:,} without ({result.savings:.1%} saved)",
        ),
        (
            "billed input",
            f"{result.billed_with:,} with the guard, {result.billed_without:,} "
            "without (agent calls, the prefix unchanged since the previous call "
            "at 10%)",
        ),
        ("guard events", events or "none"),
        ("early fact", early_fact(result)),
        ("answer", result.answer or "(none)"),
        ("checkpoints", f"{result.db} (SQLite), thread {result.thread_id}"),
        (
            "look inside",
            f"context-guard inspect {result.db} --thread {result.thread_id} "
            f"--window {result.context_window} --reserve {result.reserve_tokens}",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    return "\nreport\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)
