"""Replay the shared SWE trajectories at 16k, 32k and 128k, strategies side by side.

Every one of the 42 transcripts is replayed call by call (the prompt of call k is
the history before the k-th assistant message) with: no guard, ``trim_messages``
as LangGraph's docs use it, the "sticky cut" baseline, LangChain's
``SummarizationMiddleware`` (scripted summarizer),
``ContextEditingMiddleware(ClearToolUsesEdit)``, our ``ContextGuard`` (also with
``stable_prefix=False``), and our guard with compaction. See
``langchain_context_guard.replay`` for what is measured.

Writes ``benchmarks/results/replay.json`` and ``replay.png``. With ``--sweep`` it
instead replays every strategy plus our guard under a list of ``GuardPolicy``
settings at 16k and 32k, with live usage feedback (``--recorded``: also with the
recorded usage), and writes ``replay_sweep.json`` and ``replay_tradeoff.png``
(billed input against content evidence, one point per strategy and setting).
With ``--halves`` it replays the default guard and each sweep setting on the first
and on the last half of the transcripts (by file name) on their own and writes
``replay_halves.json``: a default should change only where a setting wins on both.
With ``--cache`` it bills with a five-minute provider cache (``cache_ttl``):
the transcripts' own call times, then seeded synthetic pauses (``CACHE_GAPS``),
the default guard against one timed to the cache (``cache_ttl_seconds=300``),
and writes ``replay_cache.json``.
With ``--recoverable`` it replays the default guard, the guard with markers that
name archived results (``archived_results``) and the guard as an adapter with a
``ResultArchive`` runs it (``GuardPolicy.with_archive``), also with the turns
digest (``digest_form="turns"``), at 16k and 32k on the SWE trajectories and on
the multitool transcripts (``shared/data/multitool``, when present), and writes
``replay_recoverable.json``:
a needle is recoverable when its text is sent, or a sent marker or digest points
to its archived source.
With ``--families`` it replays the shared multi-tool transcripts (Claude Code,
OpenHands, SWE-agent 0.x: ``shared/data/multitool``) at 16k and 32k, each agent
family and each half of it (by file name) on its own, with the guard, the sticky
cut, ``trim_messages``, context editing and the guard under each policy of
``FAMILY_POLICIES``, and writes ``replay_families.json``.
Windows run in parallel processes (``--jobs``, default 2). A benchmark, not a test.

Run:  python benchmarks/replay_benchmark.py [--sweep [--recorded] | --halves | --cache
      | --recoverable | --families] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

from langchain_context_guard.replay import (
    WINDOWS,
    GapModel,
    ReplayResult,
    available_strategies,
    default_reserve,
    format_table,
    load_paths,
    plot_replay,
    plot_tradeoff,
    replay,
    shared_multitool_dir,
    shared_trajectory_dir,
)

RESULTS = Path(__file__).resolve().parent / "results"

_TURNS: dict[str, Any] = {"digest": True, "digest_form": "turns"}
"""The turns digest (``digest_form="turns"``), swept and replayed per family."""
SWEEP: dict[str, dict[str, Any]] = {
    "prune_to=0.3": {"prune_to": 0.3},
    "prune_to=0.5": {"prune_to": 0.5},
    "prune_to=0.6": {"prune_to": 0.6},
    "compress_assistant_text=false": {"compress_assistant_text": False},
    "compress_min_share=0": {"compress_min_share": 0.0},
    "digest=true": {"digest": True},
    "digest=true, digest_form=turns": _TURNS,
    "interactive_tuning=false": {"interactive_tuning": False},
    "dedupe_call_text=false": {"dedupe_call_text": False},
    "keep_recent_tool_results=6": {"keep_recent_tool_results": 6},
    "compress_head_lines=30": {"compress_head_lines": 30},
    "compress_min_chars=1000": {"compress_min_chars": 1000},
    "prune_to=0.6, compress_head_lines=30": {
        "prune_to": 0.6,
        "compress_head_lines": 30,
    },
    "bash supersede_key=command": {
        "tool_policies": {"bash": {"supersede_key": "command"}}
    },
    "bash keep_recent=2": {"tool_policies": {"bash": {"keep_recent": 2}}},
    "bash keep_recent=5": {"tool_policies": {"bash": {"keep_recent": 5}}},
    "max_tool_result_share=0.05": {"max_tool_result_share": 0.05},
    "max_tool_result_share=0.2": {"max_tool_result_share": 0.2},
    "safety_margin=0": {"safety_margin": 0.0},
    "usage_anchoring=false": {"usage_anchoring": False},
    "compaction": {"compaction": True},
}
"""GuardPolicy settings tried; ``budget_share`` sets ``reserve_tokens`` so the
guard's budget is that share of the benchmark's, ``compaction`` adds our
``Compactor`` (default settings) in front of ``prepare``."""


SWEEP_WINDOWS = (16_000, 32_000)
"""Windows the sweep replays (128k prunes almost nothing)."""

CACHE_TTL = 300.0
"""The provider cache lifetime ``--cache`` bills with (Anthropic's default)."""
CACHE_GAPS = ("real", "pauses:0.05:10m", "pauses:0.2:10m")
"""How ``--cache`` times the calls: the transcripts' timestamps, then a ten-minute
pause before 5% and 20% of the calls (seeded by each transcript's name)."""
TIMED = {"cache_ttl_seconds=300": {"cache_ttl_seconds": CACHE_TTL}}
ARCHIVED = {
    "archived_results": {"archived_results": True},
    "guard+archive": {"archive": True},
    "guard+archive, turns": {"archive": True, "digest": True, "digest_form": "turns"},
}
"""The guard with markers that name archived results only, and as an adapter
with a ``ResultArchive`` runs it (``GuardPolicy.with_archive``: a small digest
names every trimmed result by key, pruning keeps 0.6 of the budget, results
under 1,000 characters stay whole; after a person's reply the archived
interactive settings, ``INTERACTIVE_ARCHIVED``), also with the turns digest,
which keeps its own room
(``GuardPolicy(digest=True, digest_form="turns").with_archive()``:
``digest_share`` 0.15) (``--recoverable``)."""


def _for_window(options: dict[str, Any], window: int) -> dict[str, Any]:
    options = dict(options)
    share = options.pop("budget_share", None)
    if share is not None:
        budget = window - default_reserve(window)
        options["reserve_tokens"] = window - int(share * budget)
    return options


def _one_window(job: dict[str, Any]) -> ReplayResult:
    data = job["data"]
    transcripts = load_paths(data if isinstance(data, list) else [data])
    if job["names"] is not None:
        transcripts = {n: transcripts[n] for n in job["names"]}
    window = job["window"]
    variants = {k: _for_window(v, window) for k, v in (job["variants"] or {}).items()}
    return replay(
        transcripts,
        windows=[window],
        strategies=job["strategies"],
        guard_variants=variants,
        usage_feedback=job["feedback"],
        cache_ttl=job["cache_ttl"],
        gaps=GapModel.parse(job["gaps"]),
    )


def run(
    data: Path | list[Path],
    strategies: list[str],
    *,
    feedback: bool,
    jobs: int,
    variants: dict[str, dict[str, Any]] | None = None,
    windows: tuple[int, ...] = WINDOWS,
    names: list[str] | None = None,
    cache_ttl: float | None = None,
    gaps: str = "real",
) -> ReplayResult:
    """Replay every window (in parallel) and merge the results in window order.

    ``names``: only these transcripts; ``cache_ttl`` and ``gaps``: as ``replay``'s.
    """
    work = [
        {
            "data": [str(p) for p in data] if isinstance(data, list) else str(data),
            "window": w,
            "strategies": strategies,
            "variants": variants,
            "feedback": feedback,
            "names": names,
            "cache_ttl": cache_ttl,
            "gaps": gaps,
        }
        for w in windows
    ]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(_one_window, work))
    return ReplayResult(
        [t for part in parts for t in part.tallies],
        parts[0].counter_errors,
        parts[0].calls_per_transcript,
        feedback,
        cache_ttl=cache_ttl,
        gaps=parts[0].gaps,
    )


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def _halves(data: Path, jobs: int) -> dict[str, Any]:
    """The default guard and each sweep setting on each half of the transcripts."""
    names = sorted(load_paths([data]))
    cut = len(names) // 2
    out: dict[str, Any] = {"variants": SWEEP, "halves": {}}
    for half, part in (("first", names[:cut]), ("last", names[cut:])):
        result = run(
            data,
            ["none", "guard", *SWEEP],
            feedback=True,
            jobs=jobs,
            variants=SWEEP,
            windows=SWEEP_WINDOWS,
            names=part,
        )
        out["halves"][half] = {"transcripts": part, "results": result.rows()}
        print(f"\n## {half} half: {part[0]} .. {part[-1]}\n\n{format_table(result)}")
    return out


FAMILY_STRATEGIES = [
    "none",
    "guard",
    "sticky_cut",
    "sticky_cut_newest",
    "trim_messages",
    "trim_messages_any",
    "context_editing",
    "summarization",
]
FAMILY_POLICIES: dict[str, dict[str, Any]] = {
    "Read by range": {
        "tool_policies": {"Read": {"supersede_key": ["file_path", "offset", "limit"]}}
    },
    "editor by range": {
        "tool_policies": {
            "str_replace_editor": {"supersede_key": ["path", "command", "view_range"]}
        }
    },
    "TodoWrite keep_recent=1": {"tool_policies": {"TodoWrite": {"keep_recent": 1}}},
    "compress_call_args": {"compress_call_args": True},
    "digest note": {"digest": True},
    "digest turns": _TURNS,
    "interactive_tuning=false": {"interactive_tuning": False},
    "persist mode": {"persist": True},
    "persist mode, keep_reply=false": {"persist": True, "keep_reply": False},
    "archive": {"archive": True},
}
"""Guard settings replayed per family beside the defaults (``--families``);
``persist`` runs the guard in persist mode (the replay's ``GuardPersist``),
``archive`` as an adapter with a ``ResultArchive`` runs it (``with_archive``)."""


def families(data: Path) -> dict[str, list[str]]:
    """The multi-tool transcripts' names by agent family (each file's ``family``)."""
    out: dict[str, list[str]] = {}
    for path in sorted(data.glob("*.json")):
        if path.name != "index.json":
            family = json.loads(path.read_text(encoding="utf-8"))["family"]
            out.setdefault(family, []).append(path.name.removesuffix(".json"))
    return out


def _families(data: Path, jobs: int) -> dict[str, Any]:
    """Each family and each half of it, replayed on its own at 16k and 32k."""
    out: dict[str, Any] = {"variants": FAMILY_POLICIES, "families": {}}
    strategies = [*FAMILY_STRATEGIES, *FAMILY_POLICIES]
    for family, names in families(data).items():
        cut = len(names) // 2
        parts = {"all": names, "first": names[:cut], "last": names[cut:]}
        rows = {}
        for part, chosen in parts.items():
            result = run(
                data,
                strategies,
                feedback=True,
                jobs=jobs,
                variants=FAMILY_POLICIES,
                windows=SWEEP_WINDOWS,
                names=chosen,
            )
            rows[part] = {"transcripts": chosen, "results": result.rows()}
            print(f"\n## {family}, {part}: {len(chosen)}\n\n{format_table(result)}")
        out["families"][family] = rows
    return out


def _cache(data: Path, jobs: int) -> dict[str, Any]:
    """The default guard and one timed to the cache, billed with a cache lifetime."""
    out: dict[str, Any] = {"cache_ttl": CACHE_TTL, "variants": TIMED, "gaps": {}}
    for gaps in CACHE_GAPS:
        result = run(
            data,
            ["none", "guard", *TIMED],
            feedback=True,
            jobs=jobs,
            variants=TIMED,
            windows=SWEEP_WINDOWS,
            cache_ttl=CACHE_TTL,
            gaps=gaps,
        )
        out["gaps"][gaps] = result.rows()
        print(f"\n## calls timed by {gaps}\n\n{format_table(result)}")
    return out


def _recoverable(data: Path, jobs: int) -> dict[str, Any]:
    """The default guard and the archiving ones, on both transcript sets."""
    sets: dict[str, Path | list[Path]] = {"swe-trajectories": data}
    folder = data.parent / "multitool"
    multitool = sorted(p for p in folder.glob("*.json") if p.name != "index.json")
    if multitool:
        sets["multitool"] = multitool
    out: dict[str, Any] = {"variants": ARCHIVED, "sets": {}}
    for name, paths in sets.items():
        result = run(
            paths,
            ["none", "guard", *ARCHIVED],
            feedback=True,
            jobs=jobs,
            variants=ARCHIVED,
            windows=SWEEP_WINDOWS,
        )
        count = len(result.calls_per_transcript)
        out["sets"][name] = {"transcripts": count, "results": result.rows()}
        print(f"\n## {name} ({count} transcripts)\n\n{format_table(result)}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="GuardPolicy sweep")
    parser.add_argument("--jobs", type=int, default=2, help="parallel windows")
    parser.add_argument(
        "--recorded", action="store_true", help="sweep also with recorded usage"
    )
    parser.add_argument(
        "--halves", action="store_true", help="the sweep per half of the transcripts"
    )
    parser.add_argument(
        "--cache", action="store_true", help="bills with a 5-minute provider cache"
    )
    parser.add_argument(
        "--recoverable", action="store_true", help="needles recoverable from archives"
    )
    parser.add_argument(
        "--families", action="store_true", help="the multi-tool corpus per family"
    )
    args = parser.parse_args()
    data = shared_multitool_dir() if args.families else shared_trajectory_dir()
    if data is None:
        print("shared trajectories not found", file=sys.stderr)
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = (
        "python benchmarks/replay_benchmark.py"
        + (" --sweep" if args.sweep else "")
        + (" --recorded" if args.recorded else "")
        + (" --halves" if args.halves else "")
        + (" --cache" if args.cache else "")
        + (" --recoverable" if args.recoverable else "")
        + (" --families" if args.families else "")
    )
    start = time.perf_counter()
    if args.families:
        out, name = _families(data, args.jobs), "replay_families.json"
        out = {"command": command, "machine": _machine(), **out}
    elif args.halves:
        out, name = _halves(data, args.jobs), "replay_halves.json"
        out = {"command": command, "machine": _machine(), **out}
    elif args.recoverable:
        out, name = _recoverable(data, args.jobs), "replay_recoverable.json"
        out = {"command": command, "machine": _machine(), **out}
    elif args.cache:
        out, name = _cache(data, args.jobs), "replay_cache.json"
        out = {"command": command, "machine": _machine(), **out}
    elif not args.sweep:
        result = run(data, list(available_strategies()), feedback=True, jobs=args.jobs)
        table = format_table(result)
        out = {"command": command, "machine": _machine(), **result.to_dict()}
        plot = plot_replay(result, RESULTS / "replay.png")
        print(table)
        print(f"wrote {plot}")
        name = "replay.json"
    else:
        names = [*available_strategies(), *SWEEP]
        out = {"command": command, "machine": _machine(), "variants": SWEEP}
        for feedback in (True, False)[: 2 if args.recorded else 1]:
            result = run(
                data,
                names,
                feedback=feedback,
                jobs=args.jobs,
                variants=SWEEP,
                windows=SWEEP_WINDOWS,
            )
            key = "usage_feedback" if feedback else "recorded_usage"
            out[key] = result.rows()
            print(f"\n## {key}\n\n{format_table(result)}")
            if feedback:
                plot = plot_tradeoff(result.rows(), RESULTS / "replay_tradeoff.png")
                print(f"wrote {plot}")
        name = "replay_sweep.json"
    out["seconds"] = round(time.perf_counter() - start, 1)
    (RESULTS / name).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS / name} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
