"""The ``context-guard`` command line: ``demo``, ``inspect`` and ``replay``.

Settings come from flags, a YAML file (``--config``) and ``CONTEXT_GUARD_*``
environment variables; flags win over the environment, the environment over the
file (the library's precedence, ``GuardPolicy.from_env``).
Every expected failure (a missing or malformed file, a bad setting) ends with
exit code 2 and one line on stderr that names the file, the line and the fix.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from ._args import OneLineParser, output_arg, positive_arg, window_arg

# The engine and the replay loaders import on use: ``--help`` stays instant.

PROG = "context-guard"
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``context-guard`` command line; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _quiet_library_log()
    try:
        if args[:1] == ["replay"]:
            return _run_replay(args[1:])
        parser = build_parser()
        try:
            ns = parser.parse_args(args)
        except SystemExit as exc:  # argparse already printed usage and the error
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if ns.command is None:
            parser.print_help()
            return EXIT_USAGE
        command: Callable[[argparse.Namespace], int] = ns.run
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = command(ns)
        for w in {str(w.message): w for w in caught}.values():
            print(f"{PROG}: note: {w.message}", file=sys.stderr)
        return code
    except Exception as exc:
        if not _user_error(exc):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def _user_error(exc: Exception) -> bool:
    """Whether ``exc`` is an expected failure (bad file, flag or setting)."""
    from ..engine import ContextGuardError
    from ..replay import TranscriptError
    from ._options import CommandError

    return isinstance(exc, ContextGuardError | TranscriptError | CommandError)


def _quiet_library_log() -> None:
    """The CLI reports events itself; keep Python's last-resort handler quiet."""
    logger = logging.getLogger("langchain_context_guard")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand but ``replay``."""
    parser = OneLineParser(
        prog=PROG,
        description="Keep an agent's message history inside its context window.",
        epilog="Settings: flags > CONTEXT_GUARD_* environment > --config YAML.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run a long tool-heavy LangGraph agent with the guard (offline)",
        description="Run a LangGraph agent that explores a generated repository "
        "with ls/cat/grep, with the guard and SQLite persistence. Uses a real "
        "model when OPENAI_API_KEY or ANTHROPIC_API_KEY is set, else a scripted one.",
    )
    _policy_flags(demo)
    demo.add_argument(
        "--steps", type=positive_arg, default=60, help="tool calls to make (default 60)"
    )
    demo.add_argument(
        "--db",
        type=output_arg,
        default=Path("context-guard-demo.sqlite"),
        help="SQLite checkpoint file (default ./context-guard-demo.sqlite)",
    )
    demo.add_argument(
        "--model",
        default="auto",
        help="'auto' (a real model if a key is set), 'scripted', or provider:name "
        "for init_chat_model (e.g. openai:gpt-4o-mini)",
    )
    demo.add_argument("--json", action="store_true", help="print a JSON report")
    demo.set_defaults(run=_run_demo)

    inspect = sub.add_parser(
        "inspect",
        help="show what the guard would do to a transcript or checkpointed thread",
        description="Load a transcript (OpenAI JSON/JSONL, LangChain message dicts, "
        "mini-swe-agent .traj.json) or a LangGraph SQLite checkpoint database and "
        "show, message by message, what the guard keeps, cuts or drops.",
    )
    inspect.add_argument("path", type=Path, metavar="PATH", help="transcript or DB")
    inspect.add_argument(
        "--thread",
        help="thread id in a SQLite checkpoint DB (lists threads if omitted)",
    )
    _policy_flags(inspect)
    inspect.add_argument(
        "--model", help="model name: picks the window and tokenizer (e.g. gpt-4o)"
    )
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(run=_run_inspect)

    sub.add_parser(
        "replay",
        help="replay transcripts call by call under several strategies",
        add_help=False,
    )
    return parser


def _policy_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--window", type=window_arg, help="context window in tokens, e.g. 32k"
    )
    parser.add_argument(
        "--reserve", type=int, help="reply reserve (default: window/8, at most 8192)"
    )
    parser.add_argument("--config", type=Path, help="YAML file of GuardPolicy settings")


def _run_inspect(ns: argparse.Namespace) -> int:
    from ..engine import ContextGuard
    from ._inspect import (
        analyse,
        list_threads,
        load_history,
        render_json,
        render_text,
        render_threads,
    )
    from ._options import CommandError, load_policy, warn_default_window

    path: Path = ns.path
    if not path.exists():
        raise CommandError(f"{path}: no such file")
    if path.is_dir():
        raise CommandError(
            f"{path} is a folder; give a transcript file or a SQLite checkpoint DB"
        )
    flags = {"context_window": ns.window, "reserve_tokens": ns.reserve}
    policy = load_policy(config=ns.config, flags={**flags, "model": ns.model})
    history = load_history(path, ns.thread)
    if history is None:
        print(render_threads(path, list_threads(path), ns.json))
        return 0
    source = path.name if ns.thread is None else f"{path.name} thread {ns.thread}"
    guard = ContextGuard(policy, model=policy.model)  # a name also picks the window
    info = guard.window()
    warn_default_window(policy.model, info.tokens, info.source)
    analysis = analyse(guard, history)
    render = render_json if ns.json else render_text
    reserve = info.tokens - guard.budget(window=info.tokens)  # as the guard counts
    print(render(source, analysis, reserve))
    return 0


def _run_demo(ns: argparse.Namespace) -> int:
    from ._options import CommandError

    try:
        import langchain.agents  # noqa: F401
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError as exc:
        raise CommandError(
            f"demo needs {exc.name}; install it with: "
            "pip install 'langchain-context-guard[offline,agents,sqlite]'"
        ) from None
    from ._demo_command import run_demo_command

    return run_demo_command(ns)


def _run_replay(argv: list[str]) -> int:
    from ._options import CommandError

    try:
        from ._replay import main_replay
    except ImportError as exc:
        if exc.name not in {"langchain_context_guard.cli._replay", None}:
            raise CommandError(
                f"replay needs {exc.name}; install langchain-context-guard[dev]"
            ) from None
        raise CommandError("replay is not available in this installation") from None
    try:
        return main_replay(argv)
    except SystemExit as exc:  # its argparse: --help, or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
