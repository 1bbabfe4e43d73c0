"""The replay's plots: context per call, cumulative billed input, the trade-off.

matplotlib (the ``plot`` extra) is imported only when a plot is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._results import ReplayResult


def plot_replay(result: ReplayResult, path: str | Path) -> Path:
    """Plot context per call of the largest transcript and cumulative billed input.

    One row per window. Needs matplotlib (the ``plot`` extra); draws on an Agg
    canvas without touching pyplot's global backend.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(result.calls_per_transcript)
    offsets = [0]
    for n in result.calls_per_transcript.values():
        offsets.append(offsets[-1] + n)
    none = [t for t in result.tallies if t.strategy == "none"] or result.tallies[:1]
    peak = max(
        range(len(names)),
        key=lambda i: max(none[0].tokens[offsets[i] : offsets[i + 1]], default=0),
    )
    windows = list(dict.fromkeys(t.window for t in result.tallies))
    fig = Figure(figsize=(13, 3.8 * len(windows)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(windows), 2, squeeze=False)
    for row, window in enumerate(windows):
        left, right = axes[row]
        for t in (t for t in result.tallies if t.window == window):
            series = t.tokens[offsets[peak] : offsets[peak + 1]]
            left.plot(range(1, len(series) + 1), series, label=t.strategy)
            cumulative, total = [], 0.0
            for b in t.billed:
                total += b
                cumulative.append(total / 1e6)
            right.plot(cumulative, label=t.strategy)
            budget = t.window - t.reserve
        left.axhline(budget, color="grey", linestyle="--", label="budget")
        left.set_title(f"{window // 1000}k window: context per call ({names[peak]})")
        left.set_xlabel("model call")
        left.set_ylabel("prompt tokens")
        right.set_title(f"{window // 1000}k window: cumulative billed input")
        right.set_xlabel("model call (all transcripts)")
        right.set_ylabel("million tokens")
        left.legend(fontsize=7)
        right.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    return out


def plot_tradeoff(
    rows: Sequence[Mapping[str, Any]],
    path: str | Path,
    windows: Sequence[int] = (16_000, 32_000),
) -> Path:
    """Billed input against content evidence, one point per strategy or setting.

    ``rows`` are ``ReplayResult.rows()`` dicts (a strategy run and a guard
    sweep can be concatenated). One panel per window; ours (guard strategies and
    settings) in blue circles, others in red squares; hollow markers went over
    budget on some call.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7 * len(windows), 6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(windows), squeeze=False)[0]
    for ax, window in zip(axes, windows, strict=True):
        for r in rows:
            if r["window"] != window or r["content_evidence_pct"] is None:
                continue
            x, y = r["billed_vs_none"], r["content_evidence_pct"]
            name = str(r["strategy"])
            ours = name.startswith("guard") or "=" in name or name == "compaction"
            ax.scatter(
                [x],
                [y],
                marker="o" if ours else "s",
                facecolors="none" if r["over_budget"] else None,
                edgecolors="C0" if ours else "C3",
                color="C0" if ours else "C3",
            )
            ax.annotate(str(r["strategy"]), (x, y), fontsize=6, alpha=0.8)
        ax.set_title(f"{window // 1000}k window: content evidence vs billed input")
        ax.set_xlabel("billed input vs no guard")
        ax.set_ylabel("content evidence kept (%)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    return out
