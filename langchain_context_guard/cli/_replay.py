"""``context-guard replay``: its flags, and what it prints and writes.

The replay itself is a library (``langchain_context_guard.replay``); this is its
command line.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..engine import ContextGuardError
from ..replay import (
    STRATEGIES,
    WINDOWS,
    GapModel,
    TranscriptError,
    available_strategies,
    format_table,
    load_paths,
    plot_replay,
    replay,
    seconds,
)
from ._args import OneLineParser, output_arg, positive_arg, window_arg

_TERMS = {
    "strategies": {
        "none": "everything sent, nothing pruned: the baseline of every bill",
        "trim_messages": "langchain-core's trim_messages to the budget, oldest "
        "first, tool pairs kept",
        "sticky_cut": "one cut point, moved forward only when the prompt no "
        "longer fits (a cache-friendly trim, no compression)",
        "sticky_cut_newest": "the same, but a call whose newest turn alone "
        "overflows the cut sends that turn, its results cut to fit, not the "
        "system prompt and task alone",
        "summarization": "LangChain's SummarizationMiddleware, scripted summarizer",
        "context_editing": "LangChain's ContextEditingMiddleware (ClearToolUsesEdit)",
        "guard_no_stable": "this guard pruning afresh on every call "
        "(stable_prefix=False)",
        "guard": "this guard with its defaults",
        "guard+compaction": "this guard with LLM compaction (scripted "
        "summarizer), the history serialised into a summary prompt of its own "
        "(summary_mode='serialize')",
        "guard+compaction_append": "the same, the summary asked by appending one "
        "instruction to the prompt as sent, so its input reads the provider's "
        "cache (summary_mode='append')",
    },
    "columns": {
        "over budget": "calls sent over the budget (largest overshoot in brackets)",
        "bad pairs": "calls with a result without its call or a call without its "
        "result (a provider 400)",
        "no task": "calls whose prompt no longer held the task (the first user "
        "message)",
        "no newest": "calls whose prompt did not hold the message the call "
        "answers (a tool's result or the user's words), whole or cut down",
        "input tok": "input tokens sent",
        "billed tok": "the bill with prefix caching (a cached prefix at a "
        "tenth), summary calls included: their prefix that matches the prompt "
        "sent last at a tenth, the rest at full price",
        "billed vs none": "that bill against sending everything; + summary out "
        "adds the summary calls' replies",
        "content ev.": "of the identifiers the agent's next action reuses from "
        "earlier output, the share still sent, counting text from the history "
        "only (never the guard's own notes)",
        "line ev.": "the share of that evidence whose first line is still sent "
        "verbatim",
        "notes incl.": "content evidence counting the guard's own notes too",
        "needles": "exact facts from early tool output asked back later: the "
        "share still sent when asked",
        "recoverable": "those needles sent, or pointed to: a sent marker or the "
        "digest names the tool call (by id or key, #12) whose archived result "
        "holds them",
        "counter err": "median / p90 of the strategy's count against the provider's",
        "overhead ms": "the strategy's own time per call",
        "signed kept/dropped/rejected": "with --signed-thinking: calls that kept a "
        "signed thinking block, calls that sent a reply without its block, and "
        "calls a model binding each block to the prompt that produced it would "
        "reject (a kept block behind another prefix)",
    },
}
"""What the replay's strategies and table columns are (``--help``, docs/cli.md)."""


def _explained() -> str:
    """``_TERMS`` as ``--help``'s epilog: a wrapped, indented list per group."""
    out: list[str] = []
    for group, terms in _TERMS.items():
        out.append(f"{group}:")
        for name, what in terms.items():
            lines = textwrap.wrap(what, width=56) or [""]
            out.append(f"  {name:<17} {lines[0]}")
            out.extend(f"  {'':<17} {line}" for line in lines[1:])
        out.append("")
    return "\n".join(out)


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def _duration(text: str) -> float:
    try:
        return seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gaps(text: str) -> GapModel:
    try:
        return GapModel.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="context-guard replay",
        description="Replay agent transcripts call by call under a context window "
        "and compare what each strategy sends.",
        epilog=_explained(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        help="transcript files or directories of .traj.json files "
        "(default: the shared SWE trajectories)",
    )
    p.add_argument(
        "-w",
        "--window",
        type=window_arg,
        action="append",
        help="context window in tokens, e.g. 32k (repeatable; default 16k 32k 128k)",
    )
    p.add_argument(
        "--reserve", type=int, help="reply reserve (default: window/8, at most 8192)"
    )
    p.add_argument(
        "-s",
        "--strategy",
        action="append",
        choices=STRATEGIES,
        help="strategy to replay (repeatable; default: all)",
    )
    p.add_argument(
        "--guard-option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GuardPolicy setting for our guard, e.g. compress_trigger=0.5; "
        "VALUE is JSON when it parses, e.g. "
        'tool_policies=\'{"bash": {"keep_recent": 2}}\'',
    )
    p.add_argument(
        "--limit", type=positive_arg, help="replay only the first N transcripts"
    )
    p.add_argument(
        "--cache-ttl",
        type=_duration,
        metavar="DURATION",
        help="the provider's prompt-cache lifetime, e.g. 5m: a call coming later "
        "than that after the previous one is billed uncached (default: never expires)",
    )
    p.add_argument(
        "--gap-model",
        type=_gaps,
        default=GapModel(),
        metavar="MODEL",
        help="how calls are timed: 'real' (the transcripts' timestamps, else 10 s "
        "apart) or 'pauses:SHARE:DURATION', which adds a pause before that share of "
        "calls, seeded (default: real)",
    )
    p.add_argument(
        "--halves",
        action="store_true",
        help="also replay the first and the last half of the transcripts (by "
        "name) on their own and print a table for each",
    )
    p.add_argument(
        "--recorded-usage",
        action="store_true",
        help="keep the recorded reply usage instead of the usage of what was sent",
    )
    p.add_argument(
        "--signed-thinking",
        action="store_true",
        help="give every assistant message a signed thinking block and count the "
        "calls that keep, drop or break one (the last column)",
    )
    p.add_argument("--json", type=output_arg, help="write the results as JSON here")
    p.add_argument(
        "--plot",
        type=output_arg,
        default=Path("context-guard-replay.png"),
        help="write the PNG plot here (default: %(default)s)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write the plot")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


def main_replay(argv: list[str] | None = None) -> int:
    """Run ``context-guard replay``; return the exit code."""
    args = _parser().parse_args(argv)
    err = sys.stderr
    try:
        paths = args.paths or [_shared_dir()]
        transcripts = load_paths(paths)
        if args.limit is not None:
            transcripts = dict(list(transcripts.items())[: args.limit])
        if not transcripts:
            raise TranscriptError(
                f"no transcripts found in {', '.join(map(str, paths))}"
            )
        result = _run(args, transcripts)
        halves = _halves(args, transcripts) if args.halves else []
    except (TranscriptError, ContextGuardError, ValueError) as exc:
        print(f"context-guard replay: error: {exc}", file=err)
        return 2
    except ImportError as exc:
        print(
            f"context-guard replay: error: {exc}; the LangChain middleware "
            "strategies need 'langchain-context-guard[agents]'",
            file=err,
        )
        return 2
    print(format_table(result))
    _print_summaries(result)
    _print_expired(result)
    for title, half in halves:
        print(f"\n{title}\n\n{format_table(half)}")
    try:
        _write(args, argv, result)
    except _WriteError as exc:
        print(f"context-guard replay: error: {exc}", file=err)
        return 2
    return 0


def _run(args: argparse.Namespace, transcripts: dict[str, Any]) -> Any:
    """The replay the flags ask for, over ``transcripts``."""
    return replay(
        transcripts,
        windows=args.window or WINDOWS,
        strategies=args.strategy or available_strategies(),
        reserve=args.reserve,
        guard_variants={"guard": dict(args.guard_option)},
        usage_feedback=not args.recorded_usage,
        progress=not args.quiet and sys.stderr.isatty(),
        cache_ttl=args.cache_ttl,
        gaps=args.gap_model,
        signed_thinking=args.signed_thinking,
    )


def _halves(args: argparse.Namespace, transcripts: dict[str, Any]) -> list[Any]:
    """The first and the last half of the transcripts by name, each replayed."""
    names = sorted(transcripts)
    cut = len(names) // 2
    parts = [("first", names[:cut]), ("last", names[cut:])]
    return [
        (
            f"{which} {len(part)} transcripts ({part[0]} .. {part[-1]})",
            _run(args, {n: transcripts[n] for n in part}),
        )
        for which, part in parts
        if part
    ]


def _print_summaries(result: Any) -> None:
    """Summaries per run of each strategy that made any (compaction)."""
    rows = [r for r in result.rows() if r["summaries_per_run_max"]]
    if rows:
        print("\nsummaries per run (mean / max):")
    for r in rows:
        print(
            f"  {r['window'] // 1000}k {r['strategy']}: "
            f"{r['summaries_per_run']:.2f} / {r['summaries_per_run_max']}"
        )


def _print_expired(result: Any) -> None:
    """With a cache lifetime: how many calls found the cache expired."""
    if result.cache_ttl is None or not result.tallies:
        return
    tally = result.tallies[0]
    print(
        f"\ncache ttl {result.cache_ttl:g} s, calls timed by {result.gaps}: "
        f"{tally.expired:,} of {len(tally.tokens):,} calls came after the cache "
        "expired (billed uncached, for every strategy)"
    )


class _WriteError(Exception):
    """An output flag's file could not be written."""


def _write(args: argparse.Namespace, argv: list[str] | None, result: Any) -> None:
    """Write the JSON results and the plot the flags ask for.

    A failed write raises ``_WriteError`` naming that file's flag and path.
    """
    err = sys.stderr
    if args.json is not None:
        data = {"command": "context-guard replay " + " ".join(argv or sys.argv[1:])}
        text = json.dumps({**data, **result.to_dict()}, indent=1) + "\n"
        with _writing("--json", args.json):
            args.json.write_text(text, encoding="utf-8")
        print(f"wrote {args.json}")
    if not args.no_plot:
        try:
            with _writing("--plot", args.plot):
                print(f"wrote {plot_replay(result, args.plot)}")
        except ImportError:
            print(
                "plot skipped: matplotlib is not installed "
                "(pip install 'langchain-context-guard[plot]')",
                file=err,
            )


@contextmanager
def _writing(flag: str, path: Path) -> Iterator[None]:
    """Turn an ``OSError`` while writing ``path`` into a ``_WriteError``."""
    try:
        yield
    except OSError as exc:
        raise _WriteError(
            f"{flag} {path}: cannot write ({exc.strerror or exc}); choose another path"
        ) from None


def _shared_dir() -> Path:
    from ..replay import shared_trajectory_dir

    found = shared_trajectory_dir()
    if found is None:
        raise TranscriptError(
            "no transcripts given and the shared trajectory directory was not found; "
            "pass files or set CONTEXT_GUARD_TRAJECTORIES"
        )
    return found


if __name__ == "__main__":
    sys.exit(main_replay())
