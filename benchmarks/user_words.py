"""The user's own words the model still reads after compaction, with keep_user_tokens.

Replays conversations with real user turns (the multi-tool corpus's Claude Code
family, ``cc-*``), each half by name on its own, through ``guard+compaction``
(the replay's deterministic summarizer) with ``keep_user_tokens`` off and on.
For every model call after the first summary it counts the user's earlier
messages (the first request aside: the summary quotes it whole) whose text is
sent verbatim, and sums the tokens sent.

    CONTEXT_GUARD_OFFLINE=1 python benchmarks/user_words.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_guard.engine import TiktokenCounter, is_user, text_of
from langchain_context_guard.replay._strategies import make_strategies
from langchain_context_guard.replay._transcripts import (
    load_paths,
    shared_multitool_dir,
)

COMMAND = "CONTEXT_GUARD_OFFLINE=1 python benchmarks/user_words.py"
OUT = Path(__file__).resolve().parent / "results" / "user_words.json"
WINDOW = 32_000
RESERVE = 4_000
VARIANTS: dict[str, dict[str, Any]] = {
    "off": {"compaction": True},
    "keep_user_tokens=2000": {
        "compaction": True,
        "compaction_settings": {"keep_user_tokens": 2_000},
    },
}


def measure(transcripts: dict[str, list[BaseMessage]]) -> dict[str, dict[str, Any]]:
    """Per variant: user messages asked after a summary, how many sent, tokens."""
    counter = TiktokenCounter()
    out: dict[str, dict[str, Any]] = {}
    for strategy in make_strategies(
        list(VARIANTS),
        WINDOW,
        RESERVE,
        counter=counter,
        guard_variants=VARIANTS,
    ):
        asked = kept = tokens = summaries = 0
        for messages in transcripts.values():
            strategy.start()
            compacted = False
            for k, m in enumerate(messages):
                if not isinstance(m, AIMessage) or k == 0:
                    continue
                prompt = strategy.prompt(messages[:k])
                summaries += len(prompt.summaries)
                compacted = compacted or prompt.compacted
                tokens += sum(counter.count_message(s) for s in prompt.sent)
                if not compacted:
                    continue
                sent = {text_of(s.content) for s in prompt.sent if is_user(s)}
                users = [u for u in messages[:k] if is_user(u)][1:]
                asked += len(users)
                kept += sum(text_of(u.content) in sent for u in users)
        out[strategy.name] = {
            "user_messages_asked": asked,
            "sent_verbatim_pct": round(100 * kept / asked, 1) if asked else None,
            "tokens_sent": tokens,
            "summaries": summaries,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="transcripts per half")
    args = parser.parse_args()
    folder = shared_multitool_dir()
    if folder is None:
        raise SystemExit("the shared multi-tool corpus is not here")
    names = sorted(p for p in folder.glob("cc-*.json"))
    cut = len(names) // 2
    halves = {"first": names[:cut], "last": names[cut:]}
    doc: dict[str, Any] = {
        "command": COMMAND,
        "window": WINDOW,
        "limit": args.limit,
        "halves": {},
    }
    for half, paths in halves.items():
        chosen = paths[: args.limit] if args.limit else paths
        transcripts = load_paths(chosen)
        doc["halves"][half] = {
            "transcripts": sorted(transcripts),
            **measure(transcripts),
        }
        print(half, json.dumps(doc["halves"][half], indent=1))
    OUT.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
