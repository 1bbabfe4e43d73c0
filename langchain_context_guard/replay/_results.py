"""What one replay measured: per-strategy tallies, their summary, the table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ._metrics import CACHE_RATE, OUTPUT_RATE, percentile


@dataclass
class Tally:
    """Per-call figures of one strategy at one window."""

    strategy: str
    window: int
    reserve: int
    counter: str
    over_budget: int = 0
    bad_pairing: int = 0
    errors: int = 0
    task_missing: int = 0
    newest_missing: int = 0
    """Calls whose prompt lacks the newest message, the one the call answers (a
    tool's result or the user's words), whole or as a cut copy."""
    evidence_seen: int = 0
    evidence_kept: int = 0
    """Earlier identifiers still in any sent text, the library's notes included."""
    content_kept: int = 0
    """... still in a message sent from the history (notes and markers excluded)."""
    line_kept: int = 0
    """... whose first line in the history is still sent verbatim from it."""
    needles_asked: int = 0
    needles_found: int = 0
    needles_recoverable: int = 0
    """... or pointed to: a sent marker or digest names its archived source."""
    needles_by_distance: dict[int, list[int]] = field(default_factory=dict)
    """Asked and found, by how many calls after their source they are asked."""
    needles_cut: int = 0
    """Needles lost although their source message was sent (cut or compressed)."""
    needles_dropped: int = 0
    """Needles lost with their source message (trimmed, or summarised away)."""
    expired: int = 0
    """Calls that came after the provider's cache expired (billed uncached)."""
    tokens: list[float] = field(default_factory=list)
    billed: list[float] = field(default_factory=list)
    summary_calls: int = 0
    """The strategy's own summary calls."""
    summaries: list[int] = field(default_factory=list)
    """Summaries made in each run (one per compaction, a split turn's included)."""
    spent: list[float] = field(default_factory=list)
    """Input tokens of those calls (billed in ``billed``, their cached prefix at
    ``CACHE_RATE``)."""
    spent_cached: list[float] = field(default_factory=list)
    """... of which read the prompt last sent (the provider's cache)."""
    output: list[float] = field(default_factory=list)
    """Output tokens of those calls (billed at ``OUTPUT_RATE`` in ``total``)."""
    overhead_ms: list[float] = field(default_factory=list)
    signed: bool = False
    """Whether the transcripts' replies carry signed thinking (``_signed``)."""
    signed_kept: int = 0
    """Calls whose prompt kept a signed thinking block."""
    signed_dropped: int = 0
    """Calls whose prompt sent a reply without its block."""
    signed_rejected: int = 0
    """Calls whose prompt kept a block behind a prefix other than its own."""

    def summary(
        self, counter_errors: dict[str, list[float]], none_billed: float | None
    ) -> dict[str, Any]:
        """The figures as a flat JSON-ready dict."""
        billed = sum(self.billed)
        total = billed + OUTPUT_RATE * sum(self.output)
        budget = self.window - self.reserve
        errs = counter_errors.get(self.counter, [])
        return {
            "window": self.window,
            "reserve": self.reserve,
            "budget": budget,
            "strategy": self.strategy,
            "calls": len(self.tokens),
            "over_budget": self.over_budget,
            "bad_pairing": self.bad_pairing,
            "errors": self.errors,
            "task_missing": self.task_missing,
            "newest_missing": self.newest_missing,
            "peak_tokens": round(max(self.tokens, default=0.0)),
            "max_over_pct": round(
                max(0.0, 100 * (max(self.tokens, default=0.0) / budget - 1)), 2
            ),
            "input_tokens": round(sum(self.tokens) + sum(self.spent)),
            "billed_input": round(billed),
            "billed_vs_none": round(billed / none_billed, 4) if none_billed else None,
            "summary_calls": self.summary_calls,
            "summaries_per_run": (
                round(statistics.mean(self.summaries), 2) if self.summaries else None
            ),
            "summaries_per_run_max": max(self.summaries, default=0),
            "summary_input_tokens": round(sum(self.spent)),
            "summary_cached_tokens": round(sum(self.spent_cached)),
            "summary_output_tokens": round(sum(self.output)),
            "billed_with_output": round(total),
            "with_output_vs_none": (
                round(total / none_billed, 4) if none_billed else None
            ),
            "evidence_seen": self.evidence_seen,
            "evidence_kept": self.evidence_kept,
            "content_evidence_pct": _share(self.content_kept, self.evidence_seen),
            "line_evidence_pct": _share(self.line_kept, self.evidence_seen),
            "evidence_retention_pct": _share(self.evidence_kept, self.evidence_seen),
            "needles_asked": self.needles_asked,
            "needles_found": self.needles_found,
            "needle_pct": _share(self.needles_found, self.needles_asked),
            "needles_recoverable": self.needles_recoverable,
            "needle_recoverable_pct": _share(
                self.needles_recoverable, self.needles_asked
            ),
            "needle_pct_by_distance": {
                str(d): _share(found, asked)
                for d, (asked, found) in sorted(self.needles_by_distance.items())
            },
            "needles_lost_cut": self.needles_cut,
            "needles_lost_dropped": self.needles_dropped,
            "expired_calls": self.expired,
            "overhead_ms_median": round(statistics.median(self.overhead_ms or [0]), 3),
            "signed_kept_calls": self.signed_kept if self.signed else None,
            "signed_dropped_calls": self.signed_dropped if self.signed else None,
            "signed_rejected_calls": self.signed_rejected if self.signed else None,
            "counter": self.counter or None,
            "counter_median_error_pct": _pct(percentile(errs, 0.5)) if errs else None,
            "counter_p90_error_pct": _pct(percentile(errs, 0.9)) if errs else None,
        }


def _share(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def _pct(share: float) -> float:
    return round(100 * share, 2)


@dataclass(frozen=True)
class ReplayResult:
    """Everything one replay measured."""

    tallies: list[Tally]
    counter_errors: dict[str, list[float]]
    calls_per_transcript: dict[str, int]
    usage_feedback: bool
    cache_ttl: float | None = None
    """The provider's cache lifetime the bills assumed (None: never expires)."""
    gaps: str = "real"
    """How the calls were timed (``_timing.GapModel.name``)."""
    signed_thinking: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """One summary dict per (window, strategy), in replay order."""
        none = {t.window: sum(t.billed) for t in self.tallies if t.strategy == "none"}
        return [
            t.summary(self.counter_errors, none.get(t.window)) for t in self.tallies
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready results."""
        return {
            "transcripts": len(self.calls_per_transcript),
            "calls": sum(self.calls_per_transcript.values()),
            "cache_rate": CACHE_RATE,
            "output_rate": OUTPUT_RATE,
            "usage_feedback": self.usage_feedback,
            "cache_ttl": self.cache_ttl,
            "gaps": self.gaps,
            "signed_thinking": self.signed_thinking,
            "results": self.rows(),
            "counters": [
                {
                    "counter": name,
                    "calls": len(errs),
                    "median_error_pct": _pct(percentile(errs, 0.5)),
                    "p90_error_pct": _pct(percentile(errs, 0.9)),
                }
                for name, errs in self.counter_errors.items()
            ],
        }


def _signed_cell(row: dict[str, Any]) -> str:
    if row["signed_kept_calls"] is None:
        return "-"
    return (
        f"{row['signed_kept_calls']} / {row['signed_dropped_calls']} / "
        f"{row['signed_rejected_calls']}"
    )


def _cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}%"


def format_table(result: ReplayResult) -> str:
    """The results as a GitHub-flavoured markdown table.

    "content ev." is the headline evidence figure (only text sent from the
    history counts), "line ev." the share whose first line is still sent
    verbatim, "notes incl." the older figure that also counts the library's notes;
    "recoverable" the needles sent or pointed to in an archive.
    "billed vs none" is input only, the summary calls' input included (its prefix
    that matches the prompt sent last at ``CACHE_RATE``, the rest at full price);
    "+ summary out" adds their replies at ``OUTPUT_RATE`` input tokens each.
    "signed kept/dropped/rejected" counts calls (with ``signed_thinking``; else "-").
    "no newest": calls whose prompt lacks the message the call answers.
    """
    head = (
        "| window | strategy | over budget | bad pairs | no task | no newest "
        "| input tok "
        "| billed tok | billed vs none | + summary out | content ev. | line ev. "
        "| notes incl. | needles | recoverable | counter err med/p90 | overhead ms "
        "| signed kept/dropped/rejected |"
    )
    lines = [head, "|" + "---|" * 18]
    for r in result.rows():
        ratio, total = r["billed_vs_none"], r["with_output_vs_none"]
        err = "-"
        if r["counter_median_error_pct"] is not None:
            err = (
                f"{r['counter_median_error_pct']:.2f}% / "
                f"{r['counter_p90_error_pct']:.2f}%"
            )
        over = str(r["over_budget"])
        if r["over_budget"]:
            over += f" (max +{r['max_over_pct']:.1f}%)"
        if r["errors"]:
            over += f" ({r['errors']} failed)"
        cells = [
            f"{r['window'] // 1000}k",
            r["strategy"],
            over,
            str(r["bad_pairing"]),
            str(r["task_missing"]),
            str(r["newest_missing"]),
            f"{r['input_tokens'] / 1e6:.2f}M",
            f"{r['billed_input'] / 1e6:.2f}M",
            f"{ratio:.3f}x" if ratio is not None else "-",
            f"{total:.3f}x" if total is not None else "-",
            _cell(r["content_evidence_pct"], 2),
            _cell(r["line_evidence_pct"]),
            _cell(r["evidence_retention_pct"]),
            _cell(r["needle_pct"]),
            _cell(r["needle_recoverable_pct"]),
            err,
            f"{r['overhead_ms_median']:.2f}",
            _signed_cell(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
