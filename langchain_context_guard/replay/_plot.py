"""The replay's plots: context per call, cumulative billed input, the trade-off.

matplotlib (the ``plot`` extra) is imported only when a plot is drawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._results import ReplayResult


def plot_replay(result: ReplayResult, path: str | Path) -> Path:
    """Plot, per window: context per call, cumulative billed input, the trade-off.

    One row per window: the context each strategy sends per call on the
    transcript where sending everything peaks (named in the title), the
    cumulative billed input over all transcripts, and billed input against
    content evidence (``plot_tradeoff``'s panel); one colour per strategy.
    Needs matplotlib (the ``plot`` extra); draws on an Agg canvas without
    touching pyplot's global backend.
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
    colours = _colours(t.strategy for t in result.tallies)
    rows = result.rows()
    fig = Figure(figsize=(19, 4.2 * len(windows)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(windows), 3, squeeze=False)
    for row, window in enumerate(windows):
        left, middle, right = axes[row]
        for t in (t for t in result.tallies if t.window == window):
            style = {"label": t.strategy, "color": colours[t.strategy]}
            series = t.tokens[offsets[peak] : offsets[peak + 1]]
            left.plot(range(1, len(series) + 1), series, **style)
            cumulative, total = [], 0.0
            for b in t.billed:
                total += b
                cumulative.append(total / 1e6)
            middle.plot(cumulative, **style)
            budget = t.window - t.reserve
        left.axhline(budget, color="grey", linestyle="--", label="budget")
        left.set_title(
            f"{window // 1000}k: context per call of {names[peak]}\n"
            "(the transcript where sending everything peaks)",
            fontsize=9,
        )
        left.set_xlabel("model call")
        left.set_ylabel("prompt tokens")
        middle.set_title(f"{window // 1000}k: cumulative billed input", fontsize=9)
        middle.set_xlabel("model call (all transcripts)")
        middle.set_ylabel("million tokens")
        left.legend(fontsize=7)
        middle.legend(fontsize=7)
        _tradeoff_panel(right, rows, window, colours)
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
        _tradeoff_panel(ax, rows, window)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    return out


def _colours(strategies: Iterable[str]) -> dict[str, str]:
    """One distinct colour per strategy, the same in every panel."""
    names = list(dict.fromkeys(strategies))
    return {name: f"C{i % 10}" for i, name in enumerate(names)}


def _tradeoff_panel(
    ax: Any,
    rows: Sequence[Mapping[str, Any]],
    window: int,
    colours: Mapping[str, str] | None = None,
) -> None:
    """Billed input against content evidence at ``window``, a point per strategy.

    Up and to the left is better. Ours (guard strategies and settings) are
    circles, others squares; hollow markers went over budget on some call.
    """
    for r in rows:
        if r["window"] != window or r["content_evidence_pct"] is None:
            continue
        x, y = r["billed_vs_none"], r["content_evidence_pct"]
        name = str(r["strategy"])
        ours = name.startswith("guard") or "=" in name or name == "compaction"
        colour = (colours or {}).get(name, "C0" if ours else "C3")
        ax.scatter(
            [x],
            [y],
            marker="o" if ours else "s",
            facecolors="none" if r["over_budget"] else colour,
            edgecolors=colour,
        )
        ax.annotate(name, (x, y), fontsize=6, alpha=0.8)
    ax.set_title(
        f"{window // 1000}k: content evidence vs billed input (up-left is better)",
        fontsize=9,
    )
    ax.set_xlabel("billed input vs no guard")
    ax.set_ylabel("content evidence kept (%)")
    ax.grid(alpha=0.3)
