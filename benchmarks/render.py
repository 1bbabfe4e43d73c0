"""Write BENCHMARKS.md from ``benchmarks/results/*.json``, so it cannot drift.

Every table is built from one results file, under the command that wrote it
(the file's ``command``). Rerun a benchmark, then this script::

    python benchmarks/render.py           # rewrite BENCHMARKS.md
    python benchmarks/render.py --check   # exit 1 if BENCHMARKS.md is out of date

How each figure is measured: docs/benchmarks.md. How they changed: CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "BENCHMARKS.md"

sys.path.insert(0, str(ROOT / "benchmarks"))

import _speed  # noqa: E402  (the speed table's own renderer and targets)

OURS = {"guard", "guard_no_stable", "guard+compaction", "guard+compaction_append"}
SWEEP_WINDOWS = (16_000, 32_000)
CONTENT_TARGET = {16_000: 97.5, 32_000: 99.7}
"""Content evidence the default policy must keep, by window (percent)."""
BILLED_TARGET = {16_000: 0.75, 32_000: 0.88}
"""Billed input the default policy may take, as a share of sending everything."""


def load(name: str) -> dict[str, Any]:
    """One results file."""
    doc: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return doc


def table(head: Sequence[str], rows: Iterable[Sequence[object]], right: int = 0) -> str:
    """A Markdown table; the last ``right`` columns right-aligned."""
    left = len(head) - right
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * left + "---:|" * right,
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def command(doc: dict[str, Any]) -> str:
    """The fenced command that reproduces a results file."""
    return f"```bash\n{doc['command']}\n```"


def k(window: int) -> str:
    """16000 -> 16k."""
    return f"{window // 1000}k"


def over(row: dict[str, Any]) -> str:
    """Calls over budget, with the worst overshoot."""
    if not row["over_budget"]:
        return "0"
    return f"{row['over_budget']:,} (+{row['max_over_pct']:.1f}%)"


def name(strategy: str) -> str:
    """Our strategies in bold, the others as code."""
    return f"**{strategy}**" if strategy in OURS else f"`{strategy}`"


def by_distance(row: dict[str, Any]) -> str:
    """Needle shares by how many calls after their source they are asked."""
    shares = row["needle_pct_by_distance"].values()
    return " / ".join(f"{share:.0f}%" for share in shares)


def replay_section() -> str:
    """The replay comparison: every strategy at every window."""
    doc = load("replay.json")
    none = {
        r["window"]: _unpruned(r) for r in doc["results"] if r["strategy"] == "none"
    }
    alike = [
        r
        for r in doc["results"]
        if r["strategy"] != "none" and _unpruned(r) == none.get(r["window"])
    ]
    rows = [
        (
            k(r["window"]),
            name(r["strategy"]),
            f"{r['content_evidence_pct']:.2f}%",
            f"{r['needle_pct']:.1f}%",
            by_distance(r),
            f"{r['needles_lost_cut']:,} / {r['needles_lost_dropped']:,}",
            f"{r['billed_vs_none']:.3f}x",
            f"{r['with_output_vs_none']:.3f}x",
            over(r),
            r["bad_pairing"],
            f"{r['task_missing']:,}",
        )
        for r in doc["results"]
        if r not in alike
    ]
    same = ", ".join(f"{name(r['strategy'])} at {k(r['window'])}" for r in alike)
    counters = "; ".join(
        f"{c['counter']} {c['median_error_pct']}% / {c['p90_error_pct']}%"
        for c in doc["counters"]
    )
    head = (
        "window",
        "strategy",
        "content evidence",
        "needle share",
        "asked 3 / 10 / 30 calls later",
        "lost: cut / dropped",
        "billed vs none",
        "+ summary output",
        "over budget (worst)",
        "bad pairs",
        "calls without the task",
    )
    return "\n\n".join(
        [
            "## Replay: 42 agent runs, 1,501 model calls",
            f"{doc['transcripts']} shared SWE-bench transcripts replayed call by call "
            "at three windows (reserve: an eighth of the window). Cached input "
            f"billed at {doc['cache_rate']:.0%}, summary output at "
            f"{doc['output_rate']:g}x the input price.",
            command(doc),
            table(head, rows),
            (f"Sent as `none` sends (not in the table): {same}. " if same else "")
            + "Token counters against the provider's `prompt_tokens` "
            f"(median / p90 error): {counters}. Summaries per run (mean, most): "
            f"{_summaries(doc)}.",
        ]
    )


def _unpruned(row: dict[str, Any]) -> tuple[object, ...]:
    """What tells a strategy's replay row from sending everything."""
    keys = (
        "content_evidence_pct",
        "needle_pct",
        "billed_vs_none",
        "with_output_vs_none",
    )
    keys += ("over_budget", "bad_pairing", "task_missing", "needles_lost_cut")
    return tuple(row[key] for key in (*keys, "needles_lost_dropped"))


def _summaries(doc: dict[str, Any]) -> str:
    """Summaries per run of each compaction strategy, by window."""
    return "; ".join(
        f"{r['strategy']} {r['window'] // 1000}k {r['summaries_per_run']:g}, "
        f"{r['summaries_per_run_max']}"
        for r in doc["results"]
        if "compaction" in r["strategy"] and r.get("summaries_per_run") is not None
    )


def _row(doc: dict[str, Any], window: int, strategy: str) -> dict[str, Any]:
    return next(
        r for r in doc["results"] if r["window"] == window and r["strategy"] == strategy
    )


def targets_section() -> str:
    """The replay targets of the default policy, checked against the results."""
    doc = load("replay.json")
    rows = []
    for window in CONTENT_TARGET:
        guard = _row(doc, window, "guard")
        others = [
            r
            for r in doc["results"]
            if r["window"] == window
            and r["strategy"] not in OURS | {"none"}
            and not r["over_budget"]
        ]
        best = max(others, key=lambda r: r["needle_pct"])
        cheapest = min(others, key=lambda r: r["with_output_vs_none"])
        checks = [
            (
                f"content evidence >= {CONTENT_TARGET[window]}%",
                f"{guard['content_evidence_pct']:.2f}%",
                guard["content_evidence_pct"] >= CONTENT_TARGET[window],
            ),
            (
                f"billed <= {BILLED_TARGET[window]}x",
                f"{guard['billed_vs_none']:.3f}x",
                guard["billed_vs_none"] <= BILLED_TARGET[window],
            ),
            (
                "needle share >= the best other strategy within budget",
                f"{guard['needle_pct']:.1f}% (`{best['strategy']}` "
                f"{best['needle_pct']:.1f}%)",
                guard["needle_pct"] >= best["needle_pct"],
            ),
            (
                "more content than the cheapest other strategy within budget",
                f"{guard['content_evidence_pct']:.2f}% at "
                f"{guard['billed_vs_none']:.3f}x (`{cheapest['strategy']}` "
                f"{cheapest['content_evidence_pct']:.2f}% at "
                f"{cheapest['with_output_vs_none']:.3f}x)",
                guard["content_evidence_pct"] > cheapest["content_evidence_pct"],
            ),
            (
                "0 over budget, 0 bad pairs, the task in every call",
                f"{guard['over_budget']} / {guard['bad_pairing']} / "
                f"{guard['task_missing']} missing",
                not (
                    guard["over_budget"]
                    or guard["bad_pairing"]
                    or guard["task_missing"]
                ),
            ),
        ]
        rows += [
            (k(window), what, value, "yes" if ok else "**no**")
            for what, value, ok in checks
        ]
    return "\n\n".join(
        [
            "### Targets of the default policy",
            "Checked by this script against the replay results above (strategies "
            "within budget: no call over it).",
            table(("window", "target", "measured", "holds"), rows),
        ]
    )


def sweep_section() -> str:
    """One setting changed at a time, against the default: a row each, both windows."""
    doc = load("replay_sweep.json")
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for r in doc["usage_feedback"]:
        if r["strategy"] in doc["variants"]:
            found.setdefault(r["strategy"], {})[r["window"]] = r
    windows = sorted({w for cells in found.values() for w in cells})
    rows = [
        (
            f"`{strategy}`",
            *(
                f"{r['content_evidence_pct']:.2f}% / {r['needle_pct']:.1f}% / "
                f"{r['with_output_vs_none']:.3f}x / {over(r)}"
                for r in (cells[w] for w in windows)
            ),
        )
        for strategy, cells in found.items()
    ]
    head = (
        "setting",
        *(f"{k(w)}: content evidence / needle share / billed / over" for w in windows),
    )
    return "\n\n".join(
        [
            "## Settings sweep",
            "Each row changes the default policy only where named; compare with the "
            "**guard** rows above. `compaction`: our `Compactor` in front of "
            "`prepare`.",
            command(doc),
            table(head, rows),
        ]
    )


def _delta(row: dict[str, Any], base: dict[str, Any]) -> tuple[float, float, float]:
    """Content evidence and needle points, and billed vs none, against ``base``."""
    return (
        row["content_evidence_pct"] - base["content_evidence_pct"],
        row["needle_pct"] - base["needle_pct"],
        row["billed_vs_none"] - base["billed_vs_none"],
    )


def _wins(change: tuple[float, float, float]) -> bool:
    """No worse on content, needles and bill, and better on one."""
    content, needles, billed = change
    return content >= 0 and needles >= 0 and billed <= 0 and change != (0, 0, 0)


def halves_section() -> str:
    """Each sweep setting against the default, on each half of the transcripts."""
    doc = load("replay_halves.json")
    halves = doc["halves"]
    rows = []
    for window in SWEEP_WINDOWS:
        by_half = {
            half: {r["strategy"]: r for r in part["results"] if r["window"] == window}
            for half, part in halves.items()
        }
        base = {half: found["guard"] for half, found in by_half.items()}
        rows.append(
            (
                k(window),
                "**default**",
                *(
                    f"{b['content_evidence_pct']:.2f}% / {b['needle_pct']:.1f}% / "
                    f"{b['billed_vs_none']:.3f}x"
                    for b in base.values()
                ),
                "",
            )
        )
        for setting in doc["variants"]:
            changes = [_delta(by_half[h][setting], base[h]) for h in by_half]
            cells = [
                f"{c:+.2f} / {n:+.1f} / {round(b, 3) + 0.0:+.3f}" for c, n, b in changes
            ]
            both = "yes" if all(map(_wins, changes)) else ""
            rows.append((k(window), f"`{setting}`", *cells, both))
    first, last = halves["first"]["transcripts"], halves["last"]["transcripts"]
    head = (
        "window",
        "setting",
        f"first {len(first)}: content / needles / billed",
        f"last {len(last)}: content / needles / billed",
        "wins on both",
    )
    return "\n\n".join(
        [
            "## Settings sweep per half of the transcripts",
            f"The first {len(first)} transcripts by file name and the last "
            f"{len(last)}, each replayed on its own. The default row gives its "
            "content evidence, needle share and billed input against sending "
            "everything; each setting row its change (points, points, billed). "
            '"Wins on both": no worse on any of the three and better on one, on '
            "both halves. A default changes only where a setting wins on both.",
            command(doc),
            table(head, rows),
        ]
    )


FAMILY_ROWS = (
    "guard",
    "sticky_cut",
    "sticky_cut_newest",
    "trim_messages",
    "trim_messages_any",
    "context_editing",
    "summarization",
)
POLICY_FAMILY = {
    "Read by range": ("claude-code",),
    "editor by range": ("openhands",),
    "compress_call_args": ("claude-code", "openhands"),
    "digest turns": ("claude-code", "openhands", "swe-agent-0"),
    "interactive_tuning=false": ("claude-code",),
    "persist mode": ("claude-code",),
    "persist mode, keep_reply=false": ("claude-code",),
    "archive": ("claude-code",),
}
"""Policies of ``--families`` against the defaults, on the families whose tools
they change (``TodoWrite keep_recent=1`` and ``digest note``, in the JSON, are
in docs/configuration.md;
``compress_call_args`` leaves SWE-agent 0.x as it is: no call there has two
arguments and a long one; the interactive settings and persist mode's reply
change nothing where no person replies: OpenHands and SWE-agent 0.x, in the JSON;
``archive`` there too, and in the recoverable table)."""


def _cells(row: dict[str, Any]) -> str:
    return (
        f"{row['content_evidence_pct']:.2f}% / {row['needle_pct']:.1f}% / "
        f"{row['billed_vs_none']:.3f}x / {over(row)} / {row['bad_pairing']} / "
        f"{row['newest_missing']}"
    )


def families_section() -> str:
    """The multi-tool corpus per agent family, and per half of each family."""
    doc = load("replay_families.json")
    rows, changes = [], []
    for family, parts in doc["families"].items():
        found = {
            part: {(r["window"], r["strategy"]): r for r in got["results"]}
            for part, got in parts.items()
        }
        sizes = "+".join(str(len(parts[p]["transcripts"])) for p in ("first", "last"))
        for window in SWEEP_WINDOWS:
            for strategy in FAMILY_ROWS:
                cells = [_cells(found[p][(window, strategy)]) for p in found]
                rows.append((f"{family} ({sizes})", k(window), name(strategy), *cells))
            for setting, owners in POLICY_FAMILY.items():
                if family in owners:
                    deltas = [
                        _delta(found[h][(window, setting)], found[h][(window, "guard")])
                        for h in ("first", "last")
                    ]
                    cells = [
                        f"{c:+.2f} / {n:+.1f} / {round(b, 3) + 0.0:+.3f}"
                        for c, n, b in deltas
                    ]
                    both = "yes" if all(map(_wins, deltas)) else ""
                    changes.append((k(window), f"`{setting}` ({family})", *cells, both))
    head = (
        "family (halves)",
        "window",
        "strategy",
        *(
            f"{p}: content / needles / billed / over / bad pairs / no newest"
            for p in ("all", "first", "last")
        ),
    )
    change_head = ("window", "policy", "first half", "last half", "wins on both")
    return "\n\n".join(
        [
            "## Replay per agent family: multi-tool and interactive agents",
            "The shared multi-tool transcripts (Claude Code conversations, OpenHands "
            "with `str_replace_editor`, SWE-agent 0.x), each family and each half of "
            "it (by file name) replayed on its own, as the replay above "
            '(`trim_messages` with `start_on="human"` as LangGraph\'s docs use it, '
            "`trim_messages_any` without `start_on`; `summarization` is LangChain's "
            "`SummarizationMiddleware`); `no newest`: calls whose prompt lacks the "
            "message the call answers (a tool's result or the user's words; the "
            "sticky cut moves its cut past it when it alone does not fit the half "
            "of the budget a cut keeps, and then sends the system prompt and the "
            "task alone). Per-tool "
            "policies against the defaults on the families whose tools they change "
            '(points, points, billed): `Read by range` is `supersede_key=["file_path", '
            '"offset", "limit"]`, `editor by range` `["path", "command", '
            '"view_range"]` for `str_replace_editor`, `compress_call_args` the '
            "setting (an old call's long text arguments compressed with its "
            'result), `digest turns` `digest=True, digest_form="turns"` (the newest '
            "trimmed turns kept as their calls, each result a one-line placeholder "
            "or, when short, whole), and `interactive_tuning=false` the defaults "
            "without the interactive settings (on by default: once a user message "
            "follows an answer, the turns digest with `prune_to=0.5` and "
            "`keep_recent_tool_results=4`, so a pruning keeps half the budget, the "
            "digest's 0.15 besides, and the newest 4 results whole; on OpenHands "
            "and SWE-agent 0.x the same as without, in the JSON). A setting "
            "added to the defaults leaves the interactive settings on where it "
            "does not set them itself. `persist mode`: the guard as a hook in "
            "persist mode runs it, each call on the prompt it sent last and the "
            "new messages (`prepare(persist=True)`, which keeps the person's "
            "newest reply and its answer while it can, `keep_reply`), and "
            "`keep_reply=false` the same without. `archive`: the guard as an adapter "
            "with a `ResultArchive` runs it (`with_archive()`; after a reply the "
            "archived interactive settings: the turns digest in 0.45 of the budget, "
            "a pruning keeping 0.2 besides).",
            command(doc),
            table(head, rows),
            table(change_head, changes),
            family_targets(doc),
        ]
    )


FAMILY_CONTENT_TARGET = {16_000: 92.0, 32_000: 98.0}
"""Content evidence the default guard must keep on the multi-tool set, by window."""
INTERACTIVE_CONTENT_TARGET = ("claude-code", 16_000, 91.0)
"""... and on the conversations with a person, at the window named."""
BASELINE = "sticky_cut_newest"
"""The sticky cut that answers every call, the guard's bill compared with it too."""


def _whole(doc: dict[str, Any], window: int, strategy: str) -> dict[str, float]:
    """One strategy over every family: content, bill, over budget, bad pairs."""
    rows = [
        r
        for parts in doc["families"].values()
        for r in parts["all"]["results"]
        if r["window"] == window and r["strategy"] in (strategy, "none")
    ]
    ours = [r for r in rows if r["strategy"] == strategy]
    seen = sum(r["evidence_seen"] for r in ours)
    kept = sum(
        round(r["content_evidence_pct"] * r["evidence_seen"] / 100) for r in ours
    )
    none = sum(r["billed_input"] for r in rows if r["strategy"] == "none")
    return {
        "content": 100 * kept / seen,
        "billed": sum(r["billed_input"] for r in ours) / none,
        "over": sum(r["over_budget"] for r in ours),
        "bad": sum(r["bad_pairing"] for r in ours),
    }


def family_targets(doc: dict[str, Any]) -> str:
    """The multi-tool targets of the default guard, on the whole set."""
    rows = []
    family, at, least = INTERACTIVE_CONTENT_TARGET
    for window, target in FAMILY_CONTENT_TARGET.items():
        guard = _whole(doc, window, "guard")
        bills = [_whole(doc, window, s)["billed"] for s in ("sticky_cut", BASELINE)]
        mine = next(
            r["content_evidence_pct"]
            for r in doc["families"][family]["all"]["results"]
            if r["window"] == window and r["strategy"] == "guard"
        )
        goal = least if window == at else None
        missed = [
            what
            for what, failed in (
                (f"content under {target}%", guard["content"] < target),
                (f"{family} under {least}%", goal is not None and mine < goal),
                ("billed above `sticky_cut`", guard["billed"] > bills[0]),
                (f"billed above `{BASELINE}`", guard["billed"] > bills[1]),
                ("calls over budget or with bad pairs", guard["over"] or guard["bad"]),
            )
            if failed
        ]
        rows.append(
            (
                k(window),
                f"{guard['content']:.2f}% (>= {target:g}%)",
                f"{mine:.2f}%" + (f" (>= {goal:g}%)" if goal is not None else ""),
                " / ".join(f"{b:.3f}x" for b in (guard["billed"], *bills)),
                f"{guard['over']:.0f} / {guard['bad']:.0f}",
                ", ".join(f"**{m}**" for m in missed) or "none",
            )
        )
    head = (
        "window",
        "content evidence",
        f"{family}",
        f"billed: guard / `sticky_cut` / `{BASELINE}`",
        "over budget / bad pairs",
        "targets missed",
    )
    return "\n\n".join(
        [
            "Targets of the default guard on the whole multi-tool set (every family "
            "together: content evidence over all identifiers, bill over what sending "
            f"everything bills). `{BASELINE}` is the sticky cut that sends, on the "
            "calls where `sticky_cut` sends the system prompt and the task alone "
            "(`no newest` above), the turn the call answers, its results cut to fit.",
            table(head, rows),
        ]
    )


def _top(counts: dict[str, int], n: int = 3) -> str:
    """The ``n`` largest counts, as ``name count``."""
    return ", ".join(f"{key} {value:,}" for key, value in list(counts.items())[:n])


def _bill(row: dict[str, Any]) -> str:
    parts = row["bill_vs_none"]
    return f"{row['billed_vs_none']:.3f}x = " + " + ".join(
        f"{parts[p]:.3f}" for p in ("cached", "new", "rewritten", "re-sent")
    )


def loss_section() -> str:
    """Where the guard loses content evidence on each family, and its bill's parts."""
    doc = load("loss_analysis.json")
    rows = []
    for family, windows in doc["families"].items():
        for window, found in windows.items():
            guard, sticky = found["guard"], found["sticky_cut"]
            distance = " / ".join(
                str(guard["lost_by_distance"].get(b, 0)) for b in doc["distances"]
            )
            rows.append(
                (
                    family,
                    k(int(window)),
                    f"{guard['evidence_lost']:,} / {guard['evidence_seen']:,}",
                    _top(guard["lost_by_pass"]),
                    _top(guard["lost_by_tool"]),
                    distance,
                    _bill(guard),
                    _bill(sticky),
                    f"{guard['prefix_breaks']} / {sticky['prefix_breaks']}",
                )
            )
    head = (
        "family",
        "window",
        "guard lost / seen",
        "lost by pass",
        "lost from (holder)",
        "calls back " + " / ".join(doc["distances"]),
        "guard billed = cached + new + rewritten + re-sent",
        "`sticky_cut` billed, same parts",
        "prefix breaks guard / sticky",
    )
    return "\n\n".join(
        [
            "## Where the content goes: losses and bill by part",
            "Each family at 16k and 32k replayed as in the per-family table, every "
            "earlier identifier the guard's prompt no longer holds charged to the "
            "newest message that held it: what the guard did to it (`trimmed`: not "
            "sent; else the kind of cut it was sent with), whose it was (a tool's "
            "result, a tool's call arguments, the assistant's text) and how many "
            "calls back it was written. The bill, as a share of sending everything, "
            "split into the cached prefix (at the cache rate), new messages, "
            "messages the strategy rewrote, and unchanged ones re-sent behind a "
            "change; a prefix break is a call whose prompt does not extend the last.",
            command(doc),
            table(head, rows),
        ]
    )


def cache_section() -> str:
    """The default guard and one timed to the cache, with a cache lifetime."""
    doc = load("replay_cache.json")
    rows = []
    for gaps, results in doc["gaps"].items():
        for r in results:
            if r["strategy"] == "none":
                continue
            timed = r["strategy"] != "guard"
            rows.append(
                (
                    f"`{gaps}`" + ("" if gaps == "real" else " (synthetic)"),
                    k(r["window"]),
                    f"`{r['strategy']}`" if timed else "**guard** (default)",
                    f"{r['expired_calls']:,}",
                    f"{r['billed_input'] / 1e6:.2f}M",
                    f"{r['billed_vs_none']:.3f}x",
                    f"{r['content_evidence_pct']:.2f}%",
                    f"{r['needle_pct']:.1f}%",
                )
            )
    head = (
        "calls timed by",
        "window",
        "guard",
        "calls after the cache expired",
        "billed input",
        "billed vs none",
        "content evidence",
        "needle share",
    )
    return "\n\n".join(
        [
            "## Pruning timed to the cache",
            f"Billed with a {doc['cache_ttl']:g}-second provider cache: a call more "
            "than that after the previous one pays for its whole prompt, for every "
            "strategy. `real`: the transcripts' own call times; `pauses:S:D` adds a "
            "pause of D before a share S of the calls (synthetic, seeded by each "
            "transcript's name). The default guard against one timed to the cache "
            "(`cache_ttl_seconds=300`, given each call's time).",
            command(doc),
            table(head, rows),
        ]
    )


def recoverable_section() -> str:
    """Needles in the prompt, and those an archive and a pointer bring back."""
    doc = load("replay_recoverable.json")
    rows, checks = [], []
    for name, part in doc["sets"].items():
        for window in SWEEP_WINDOWS:
            by = {r["strategy"]: r for r in part["results"] if r["window"] == window}
            guard, archive = by["guard"], by["guard+archive"]
            rows.append(
                (
                    f"{name} ({part['transcripts']})",
                    k(window),
                    f"{guard['needle_pct']:.1f}% / {guard['content_evidence_pct']:.2f}%"
                    f" / {guard['billed_vs_none']:.3f}x",
                    *(
                        f"{r['needle_pct']:.1f}% / "
                        f"**{r['needle_recoverable_pct']:.1f}%** / "
                        f"{r['content_evidence_pct']:.2f}% / "
                        f"{r['billed_vs_none']:.3f}x"
                        for r in (
                            by["archived_results"],
                            archive,
                            by["guard+archive, turns"],
                        )
                    ),
                )
            )
            if window == SWEEP_WINDOWS[0]:
                checks.append(_recoverable_targets(name, guard, archive))
    head = (
        "transcripts",
        "window",
        "**guard**: needles / content / billed",
        "`archived_results=True`: needles / recoverable / content / billed",
        "**guard+archive**: the same",
        "**guard+archive**, turns digest: the same",
    )
    return "\n\n".join(
        [
            "## Recoverable needles: pruned, archived, pointed to",
            "A needle is recoverable when its text is sent, or a sent marker "
            '(`read_tool_result("#12")`) or the digest names the tool call whose '
            "archived result holds it, by its id or its key (in a listed call or "
            "the line of ranges) (JSON: `needle_recoverable_pct`). "
            "`archived_results=True`: the markers only; **guard+archive**: the "
            "guard as an adapter with a `ResultArchive` runs it "
            "(`GuardPolicy.with_archive()`: a digest of 1% of the budget names "
            "trimmed results by key, pruning keeps 0.6 of the budget, results "
            "under 1,000 characters stay whole; after a person's reply the "
            "archived interactive settings: the turns digest in 0.45 of the "
            "budget, a pruning keeping 0.2 besides); turns digest: "
            '`GuardPolicy(digest=True, digest_form="turns").with_archive()`, whose '
            "digest keeps its 0.15 of the budget (0.45 after a reply; the newest "
            "trimmed turns as their "
            "calls, each result a placeholder naming its key, or whole when "
            "short: within the compression floor, 1,000 characters at 16k; and a "
            "line of keys for those past the room). "
            "Targets at 16k (recoverable >= "
            "99%, needles sent >= the guard's, content >= 96.5%, billed <= 0.70x): "
            + "; ".join(checks)
            + ".",
            command(doc),
            table(head, rows),
        ]
    )


def _recoverable_targets(
    name: str, guard: dict[str, Any], archive: dict[str, Any]
) -> str:
    """Which of the archive's 16k targets hold on one transcript set."""
    held = {
        "recoverable": archive["needle_recoverable_pct"] >= 99.0,
        "needles": archive["needle_pct"] >= guard["needle_pct"],
        "content": archive["content_evidence_pct"] >= 96.5,
        "billed": archive["billed_vs_none"] <= 0.70,
    }
    missed = [target for target, ok in held.items() if not ok]
    return f"{name} " + ("all hold" if not missed else "misses " + ", ".join(missed))


def counter_section() -> str:
    """Token counts against the provider's, per counter."""
    doc = load("bench_counter.json")
    labels = {
        "tiktoken_cl100k_text_only": "cl100k of the message text alone",
        "tiktoken_cl100k": "tiktoken cl100k, unanchored",
        "usage_anchored": "usage-anchored (the guard's default), all calls",
        "usage_anchored_calls_with_anchor": "usage-anchored, calls after the first",
        "count_tokens_approximately": "`count_tokens_approximately`",
        "count_tokens_approximately_usage_scaling": "`count_tokens_approximately`, "
        "usage-metadata scaling",
    }
    rows = [
        (
            labels.get(key, key),
            f"{s['n']:,}",
            f"{s['signed_median_pct']:+.2f}%",
            f"{s['abs_median_pct']:.2f}%",
            f"{s['abs_p90_pct']:.2f}%",
            f"{s['abs_max_pct']:.2f}%",
        )
        for key, s in doc["vs_provider"].items()
    ]
    head = ("counter", "calls", "signed median", "abs median", "abs p90", "abs max")
    return "\n\n".join(
        [
            "## Token counts against the provider",
            f"Every call of the {doc['trajectories']} transcripts, error = (count - "
            "provider `prompt_tokens`) / `prompt_tokens`.",
            command(doc),
            table(head, rows, right=5),
        ]
    )


def pricing_section() -> str:
    """Billed input under each provider's cache pricing."""
    doc = load("pricing.json")
    rows = [
        (
            k(r["window"]),
            r["strategy"],
            f"{r['input_tokens'] / 1e6:.2f}M",
            *(
                f"{b / 1e6:.2f}M ({x:.2f}x)"
                for b, x in zip(r["billed"], r["ratio"], strict=True)
            ),
        )
        for r in doc["rows"]
    ]
    head = ("window", "strategy", "input tokens", *doc["columns"])
    return "\n\n".join(
        [
            "## Billed input per provider",
            f"Every call of the replay, priced as each provider bills cached input; "
            f"{doc['note']}.",
            command(doc),
            table(head, rows),
        ]
    )


def speed_section() -> str:
    """prepare at 1,000 to 50,000 messages, with the targets."""
    doc = load("bench_speed.json")
    t, sizes = _speed.TARGETS, doc["sizes"]
    small, large = min(sizes, key=int), max(sizes, key=int)
    warm = max(sizes[s]["warm"]["reuse"]["p99"] for s in sizes)
    prune = {s: sizes[s]["warm_32k"]["prune"]["max"] for s in (small, large)}
    cold = max(sizes[s]["cold"]["ratio_cpu"] for s in sizes)
    rebuilt = sizes[small]["rebuilt"]["reuse"]["p99"]
    memory, start = doc["memory"], doc["startup"]
    checks = [
        (f"warm call p99 <= {t['warm']:g} ms", f"{warm:.2f} ms", warm <= t["warm"]),
        (
            f"a pruning call <= {t['prune_small']:g} ms ({int(small):,}) / "
            f"<= {t['prune_large']:g} ms ({int(large):,})",
            f"{prune[small]:.1f} / {prune[large]:.1f} ms",
            prune[small] <= t["prune_small"] and prune[large] <= t["prune_large"],
        ),
        (
            f"cold <= {t['cold_ratio']:g}x the batch encode (CPU)",
            f"x{cold:.2f}",
            cold <= t["cold_ratio"],
        ),
        (
            f"rebuilt from a checkpoint p99 <= {t['rebuilt']:g} ms",
            f"{rebuilt:.2f} ms",
            rebuilt <= t["rebuilt"],
        ),
        (
            f"one guard after {int(large):,} messages <= {t['memory_mb']:g} MB",
            f"{memory['one_guard_mb']} MB",
            memory["one_guard_mb"] <= t["memory_mb"],
        ),
        (
            f"`--help` <= {t['help_s']:g} s; import <= "
            f"{t['import_over_core_s']:g} s over langchain-core",
            f"{start['help']['cpu_s']} s; {start['import_over_core_cpu_s']} s",
            start["help"]["cpu_s"] <= t["help_s"]
            and start["import_over_core_cpu_s"] <= t["import_over_core_s"],
        ),
    ]
    machine = doc["machine"]
    note, cold_command = _cold_note(doc)
    return "\n\n".join(
        [
            "## Speed at every size",
            f"CPU time of the calling thread, {machine['nproc']} cores, Python "
            f"{machine['python']}, langchain-core {machine['langchain_core']}, "
            f"tiktoken {machine['tiktoken']}; a shared machine, so compare rows, "
            "not machines: identical runs of the same commit here differ by up to "
            "a third in a p99 (a warm call at 50,000 messages has read 1.4 to 2.4 "
            f"ms), so the ratio to `trim_messages` in the same run is the figure to "
            f"compare.{note}",
            command({"command": doc["command"] + cold_command}),
            table(
                ("target", "measured", "holds"),
                ((w, m, "yes" if ok else "**no**") for w, m, ok in checks),
            ),
            _speed.table(doc),
        ]
    )


def _cold_note(doc: dict[str, Any]) -> tuple[str, str]:
    """How the cold rows were measured when apart from the rest (``bench_cold.py``).

    A sentence for the section's first paragraph, and a line for its command block.
    """
    cold = doc.get("cold")
    if not cold:
        return "", ""
    machine = cold["machine"]
    start = ", ".join(f"{x:.1f}" for x in machine["loadavg_start"])
    end = ", ".join(f"{x:.1f}" for x in machine.get("loadavg_end", ()))
    sizes = ", ".join(f"{int(s):,}" for s in cold["sizes"])
    return (
        f" The cold rows ({sizes} messages: the encodes and the cold `prepare`) "
        "were measured apart, on the same machine, with their own `trim_messages` "
        f"reference (bpe-openai {machine.get('bpe_openai') or 'not installed'}; "
        f"load average {start} at the start, {end} at the end).",
        f"\n{cold['command']}",
    )


def trace_section() -> str:
    """What the traced child run costs per model call."""
    doc = load("trace_overhead.json")
    rows = [(r["handlers"], f"{r['us_per_call']:,}", r["note"]) for r in doc["rows"]]
    return "\n\n".join(
        [
            "## Trace cost per model call",
            command(doc),
            table(("callback handlers", "us per call", ""), rows),
        ]
    )


def background_section() -> str:
    """The wait the compaction trigger adds, with the summary prepared early or not."""
    doc = load("background_trigger.json")
    rows = [
        (
            r["host"],
            r["background_at"] or "off",
            r["compactions"],
            f"{r['ms_at_trigger_median']:,}",
            f"{r['ms_at_trigger_max']:,}",
        )
        for r in doc["rows"]
    ]
    head = ("host", "background_at", "summaries", "ms median", "ms max")
    return "\n\n".join(
        [
            f"## Time the compaction trigger adds ({doc['summary_s']} s summarizer)",
            command(doc),
            table(head, rows, right=3),
        ]
    )


def checkpoint_section() -> str:
    """Checkpoint storage of a 200-step run, per way of wiring the guard."""
    doc = load("bench_checkpoints_200.json")
    variants = doc["variants"]
    rows = []
    for variant, row in variants.items():
        base_name = (
            "create_agent, no guard"
            if variant.startswith("create_agent")
            else "create_react_agent, no guard"
        )
        base = variants[base_name]
        cells: list[object] = [variant]
        for backend in ("sqlite", "postgres"):
            size = row[backend]["bytes"]
            change = size / base[backend]["bytes"] - 1
            cells += [
                f"{row[backend]['checkpoints']:,}",
                f"{size / 1e6:.1f}",
                "" if variant == base_name else f"{change:+.1%}",
            ]
        rows.append(cells)
    head = (
        "variant",
        "SQLite checkpoints",
        "SQLite MB",
        "vs no guard",
        "PostgreSQL checkpoints",
        "PostgreSQL MB",
        "vs no guard",
    )
    return "\n\n".join(
        [
            "## Checkpoint storage over a 200-step run",
            command(doc),
            table(head, rows, right=6),
        ]
    )


def load_section() -> str:
    """Worker processes sharing threads on one PostgreSQL database."""
    rows = []
    commands = []
    for file in ("bench_load_8x50x100.json", "bench_load_8x16x40.json"):
        r = load(file)
        commands.append(r["command"])
        rows.append(
            (
                f"{r['workers']} x {r['threads']} threads x {r['steps_per_thread']} "
                "steps",
                f"{r['model_calls']:,}",
                f"{r['steps_handed_to_another_worker']:,}",
                r["over_budget"],
                r["bad_pairs"],
                len(r["history_problems"]),
                f"{r['steps_per_second']:.1f}",
                f"{r['step_ms_p50']:.0f} / {r['step_ms_p99']:,.0f} ms",
                f"{r['guard_ms_p50']:.0f} / {r['guard_ms_p99']:.0f} ms",
            )
        )
    head = (
        "run",
        "model calls",
        "handed to another worker",
        "over budget",
        "bad pairs",
        "lost / duplicated",
        "steps/s",
        "step p50 / p99",
        "guard p50 / p99",
    )
    return "\n\n".join(
        [
            "## Load: worker processes on one PostgreSQL database",
            "```bash\n" + "\n".join(commands) + "\n```",
            table(head, rows, right=8),
        ]
    )


def render() -> str:
    """The whole of BENCHMARKS.md."""
    sections = [
        "# Benchmarks",
        "Current figures only. This file is generated by `python "
        "benchmarks/render.py` from `benchmarks/results/*.json`; do not edit it by "
        "hand. Each table comes with the command that reproduces it. What each "
        "figure means and how it is measured: [docs/benchmarks.md]"
        "(docs/benchmarks.md); how the figures changed: [CHANGELOG.md]"
        "(CHANGELOG.md).",
        replay_section(),
        targets_section(),
        sweep_section(),
        halves_section(),
        families_section(),
        loss_section(),
        cache_section(),
        recoverable_section(),
        counter_section(),
        pricing_section(),
        speed_section(),
        trace_section(),
        background_section(),
        checkpoint_section(),
        load_section(),
    ]
    return "\n\n".join(sections) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write BENCHMARKS.md, or with ``--check`` say whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUT.read_text() != text:
            print("BENCHMARKS.md is out of date: run python benchmarks/render.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
