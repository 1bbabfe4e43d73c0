"""Where the guard loses content evidence, and what its bill is made of, per family.

Replays the shared multi-tool transcripts (``shared/data/multitool``, read in
place) at 16k and 32k through the replay's own loop (``_replay_one``: the same
plan, content-evidence metric and bill as ``replay_benchmark.py --families``),
with sending everything, the sticky cut and the default guard (and any
``--variant``), and keeps every prompt sent. Then:

- each identifier the content-evidence figure counts as lost is charged to the
  newest history message that held it: its tool (a tool result by the tool's
  name; an assistant message as ``<tool> call`` when a call's arguments hold it,
  else ``assistant text``; ``user``), what the strategy did to that message
  (``trimmed``: not sent; else the marker kind of the copy sent, ``compressed``,
  ``truncated``, ``superseded``) and how many model calls back it was written;
- each call's bill (in tokens at list price, summed and divided by sending
  everything's, so the parts add up to the replay's "billed vs none") is split
  into the cached prefix (at the cache rate), the new messages at full price
  (the reply overhead included), the messages the strategy rewrote (sent before
  with other content) and those re-sent unchanged behind a change; and the
  prefix breaks are counted by what broke them (the first message of the
  previous prompt no longer sent as it was: trimmed or its new marker).

Totals are checked against the replay's own tallies (content kept and billed),
so the attribution cannot drift from the published metric. A benchmark, not a
test. Writes ``benchmarks/results/loss_analysis.json``.

Run:  python benchmarks/loss_analysis.py [--family NAME] [--half first|last]
      [--window N] [--variant NAME=JSON]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from replay_benchmark import RESULTS, SWEEP_WINDOWS, families

from langchain_context_guard.engine import REPLY_OVERHEAD, TiktokenCounter, marker
from langchain_context_guard.replay import (
    CACHE_RATE,
    Tally,
    cached_prefix,
    default_reserve,
    from_history,
    load_paths,
    make_strategies,
    shared_multitool_dir,
)
from langchain_context_guard.replay._loop import (
    _Call,
    _Clock,
    _Measure,
    _plan,
    _replay_one,
    _with_provider,
)
from langchain_context_guard.replay._progress import quiet_guard_log
from langchain_context_guard.replay._strategies import Prompt, Strategy
from langchain_context_guard.replay._timing import GapModel

STRATEGIES = ("none", "sticky_cut", "guard")
DISTANCES = ((1, 2), (3, 5), (6, 10), (11, 20), (21, 50), (51, None))
"""Buckets of how many model calls back a lost identifier's holder was written."""
BILL_PARTS = ("cached", "new", "rewritten", "re-sent")


class Recorder(Strategy):
    """A strategy that keeps each prompt its inner strategy sends."""

    def __init__(self, inner: Strategy) -> None:
        self.inner, self.name, self.counter = inner, inner.name, inner.counter
        self.sent: list[list[BaseMessage]] = []

    def start(self) -> None:
        """Forget the previous transcript, as the inner strategy does."""
        self.inner.start()
        self.sent = []

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """The inner strategy's prompt, kept."""
        prompt = self.inner.prompt(history, now)
        self.sent.append(prompt.sent)
        return prompt


def distance_bucket(calls_back: int) -> str:
    """``3-5`` for 4 calls back (``DISTANCES``)."""
    for low, high in DISTANCES:
        if high is None or calls_back <= high:
            return f"{low}-{high}" if high is not None else f">{low - 1}"
    raise AssertionError("unreachable")


class Ids:
    """``identifiers`` of argument text, cached (the measure caches messages)."""

    def __init__(self) -> None:
        from langchain_context_guard.replay import identifiers

        self.identifiers = identifiers
        self.cache: dict[str, frozenset[str]] = {}

    def __call__(self, text: str) -> frozenset[str]:
        hit = self.cache.get(text)
        if hit is None:
            hit = self.cache[text] = self.identifiers(text)
        return hit


def holder_kind(message: BaseMessage, name: str, ids: Ids) -> str:
    """What a message holding ``name`` is: a tool's result, call, or text."""
    if isinstance(message, ToolMessage):
        return message.name or "tool"
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            args = "\n".join(str(v) for v in call["args"].values())
            if name in ids(args):
                return f"{call['name']} call"
        return "assistant text"
    return "user" if isinstance(message, HumanMessage) else message.type


def fate(message: BaseMessage, sent_by_id: dict[str, BaseMessage]) -> str:
    """What a strategy did to a history message: trimmed, or its marker's kind."""
    copy = sent_by_id.get(message.id or "")
    if copy is None:
        return "trimmed"
    mark = marker(copy)
    return str(mark.get("kind")) if mark else "unmarked"


class Attribution:
    """The losses and bill parts of one strategy at one window."""

    def __init__(self, ids: Ids) -> None:
        self.ids = ids
        self.seen = self.lost = self.calls = self.breaks = 0
        self.by_tool: Counter[str] = Counter()
        self.by_fate: Counter[str] = Counter()
        self.by_distance: Counter[str] = Counter()
        self.by_tool_fate: Counter[str] = Counter()
        self.bill: dict[str, float] = dict.fromkeys(BILL_PARTS, 0.0)
        self.broken_by: Counter[str] = Counter()

    def losses(
        self,
        messages: list[BaseMessage],
        call: _Call,
        sent: list[BaseMessage],
        measure: _Measure,
        history_ids: frozenset[str],
    ) -> None:
        """Charge each identifier the metric counts lost at one call."""
        own = [measure(m).clean_ids for m in sent if from_history(m, history_ids)]
        by_id = {m.id: m for m in sent if m.id is not None}
        self.seen += len(call.earlier)
        for name in call.earlier:
            if any(name in ids for ids in own):
                continue
            self.lost += 1
            holder = max(
                (i for i in range(call.k) if name in measure(messages[i]).ids),
                default=None,
            )
            if holder is None:
                raise AssertionError(f"{name!r} is in no message before call {call.k}")
            back = sum(isinstance(m, AIMessage) for m in messages[holder + 1 : call.k])
            tool = holder_kind(messages[holder], name, self.ids)
            what = fate(messages[holder], by_id)
            self.by_tool[tool] += 1
            self.by_fate[what] += 1
            self.by_tool_fate[f"{tool}: {what}"] += 1
            self.by_distance[distance_bucket(back + 1)] += 1

    def bills(
        self, plan: Sequence[_Call], prompts: list[list[BaseMessage]], measure: _Measure
    ) -> None:
        """Split each call's bill as ``_replay_one`` computes it."""
        previous: list[tuple[str, ...]] = []
        last: list[BaseMessage] = []
        before: dict[str, tuple[str, ...]] = {}
        for call, sent in zip(plan, prompts, strict=True):
            self.calls += 1
            infos = [measure(m) for m in sent]
            keys = [i.key for i in infos]
            cached = 0 if call.cold else cached_prefix(previous, keys)
            old = set(previous)
            parts: dict[str, float] = dict.fromkeys(BILL_PARTS, 0.0)
            parts["new"] = float(REPLY_OVERHEAD)
            for i, (m, info) in enumerate(zip(sent, infos, strict=True)):
                was = before.get(m.id) if m.id is not None else None
                if i < cached:
                    parts["cached"] += CACHE_RATE * info.tokens
                elif was == info.key or (m.id is None and info.key in old):
                    parts["re-sent"] += info.tokens
                elif was is not None:
                    parts["rewritten"] += info.tokens
                else:
                    parts["new"] += info.tokens
            if previous and cached < len(previous):
                self.breaks += 1
                by_id = {m.id: m for m in sent if m.id is not None}
                self.broken_by[fate(last[cached], by_id)] += 1
            for part, tokens in parts.items():
                self.bill[part] += call.scale * tokens
            previous, last = keys, sent
            before = {
                m.id: k for m, k in zip(sent, keys, strict=True) if m.id is not None
            }

    def to_dict(self, none_billed: float) -> dict[str, Any]:
        """JSON-ready, the bill parts as shares of sending everything's bill."""
        return {
            "evidence_seen": self.seen,
            "evidence_lost": self.lost,
            "content_evidence_pct": round(100 * (1 - self.lost / self.seen), 2)
            if self.seen
            else None,
            "lost_by_tool": dict(self.by_tool.most_common()),
            "lost_by_pass": dict(self.by_fate.most_common()),
            "lost_by_tool_and_pass": dict(self.by_tool_fate.most_common()),
            "lost_by_distance": {
                b: self.by_distance[b]
                for b in map(distance_bucket, (low for low, _ in DISTANCES))
                if self.by_distance[b]
            },
            "billed_vs_none": round(sum(self.bill.values()) / none_billed, 4),
            "bill_vs_none": {
                p: round(self.bill[p] / none_billed, 4) for p in BILL_PARTS
            },
            "calls": self.calls,
            "prefix_breaks": self.breaks,
            "breaks_by": dict(self.broken_by.most_common()),
        }


def analyse(
    transcripts: dict[str, list[BaseMessage]],
    window: int,
    variants: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Every strategy's attribution at one window, checked against its tally."""
    counter = TiktokenCounter()
    measure, ids = _Measure(counter), Ids()
    reserve = default_reserve(window)
    names = [*STRATEGIES, *variants]
    built = make_strategies(
        names, window, reserve, counter=counter, guard_variants=variants
    )
    runs = [
        (Recorder(s), Tally(s.name, window, reserve, s.counter), Attribution(ids))
        for s in built
    ]
    clock = _Clock(None, GapModel())
    with quiet_guard_log():
        for name, raw in transcripts.items():
            messages = _with_provider(raw)
            plan = _plan(name, messages, measure, counter, {}, clock)
            history_ids = frozenset(m.id for m in messages if m.id is not None)
            for recorder, tally, found in runs:
                _replay_one(recorder, tally, messages, plan, measure, True)
                found.bills(plan, recorder.sent, measure)
                for call, sent in zip(plan, recorder.sent, strict=True):
                    found.losses(messages, call, sent, measure, history_ids)
            measure.by_id.clear()
    none_billed = sum(runs[0][1].billed)
    out = {}
    for recorder, tally, found in runs:
        if found.seen - found.lost != tally.content_kept:
            raise AssertionError(f"{recorder.name}: attribution drifted from tally")
        billed = sum(tally.billed)
        if abs(sum(found.bill.values()) - billed) > 1e-6 * max(billed, 1):
            raise AssertionError(f"{recorder.name}: bill parts drifted from tally")
        out[recorder.name] = found.to_dict(none_billed)
    return out


def _summary(family: str, window: int, rows: dict[str, Any]) -> str:
    lines = [f"## {family} at {window // 1000}k"]
    for strategy, row in rows.items():
        bill = ", ".join(f"{p} {v:.3f}" for p, v in row["bill_vs_none"].items())
        lines += [
            f"- {strategy}: content {row['content_evidence_pct']}% "
            f"(lost {row['evidence_lost']} of {row['evidence_seen']}), "
            f"billed {row['billed_vs_none']:.3f}x ({bill}), "
            f"{row['prefix_breaks']} breaks {row['breaks_by']}",
            f"  by pass {row['lost_by_pass']}",
            f"  by tool {dict(list(row['lost_by_tool'].items())[:8])}",
            f"  by distance {row['lost_by_distance']}",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Analyse each family (or one) at 16k and 32k; write the JSON unless partial."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", help="only this agent family (no JSON written)")
    parser.add_argument("--half", choices=("first", "last"), help="only this half")
    parser.add_argument("--window", type=int, action="append", help="only these")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=JSON of GuardPolicy settings, analysed beside the default",
    )
    args = parser.parse_args(argv)
    data = shared_multitool_dir()
    if data is None:
        print("shared multi-tool transcripts not found", file=sys.stderr)
        return 2
    variants = {}
    for item in args.variant:
        label, _, settings = item.partition("=")
        variants[label] = json.loads(settings)
    windows = tuple(args.window or SWEEP_WINDOWS)
    start = time.perf_counter()
    out: dict[str, Any] = {
        "command": "python benchmarks/loss_analysis.py",
        "distances": [distance_bucket(low) for low, _ in DISTANCES],
        "variants": variants,
        "families": {},
    }
    for family, names in families(data).items():
        if args.family and family != args.family:
            continue
        if args.half:
            cut = len(names) // 2
            names = names[:cut] if args.half == "first" else names[cut:]
        transcripts = load_paths([data / f"{n}.json" for n in names])
        out["families"][family] = {}
        for window in windows:
            rows = analyse(transcripts, window, variants)
            out["families"][family][str(window)] = rows
            print(_summary(family, window, rows), flush=True)
    out["seconds"] = round(time.perf_counter() - start, 1)
    if args.family or args.half or args.window or variants:
        print(f"partial run in {out['seconds']} s: nothing written")
        return 0
    path = RESULTS / "loss_analysis.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
