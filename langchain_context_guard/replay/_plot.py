"""The replay's plot: context per call and cumulative billed input, per window.

matplotlib (the ``plot`` extra) is imported only when a plot is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
