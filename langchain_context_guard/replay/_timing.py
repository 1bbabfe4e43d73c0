"""When each replayed call was made, and which ones found the provider's cache cold.

A provider keeps a prompt cache for minutes (``cache_ttl``): a call coming later
than that after the conversation's previous one pays for its whole prompt,
whatever it sends. The replay times its calls by the transcript's own clock where
it has one (a mini-swe-agent reply's ``extra.response.created``, seconds, kept in
``response_metadata["created"]``) and otherwise spaces them ``GapModel.gap``
seconds apart. ``GapModel`` can also add long pauses (a person away from the
agent) at a stated share of calls, drawn from a generator seeded by the
transcript's name: the same replay always pauses at the same calls.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

CREATED = "created"
"""``response_metadata`` key of a reply's timestamp (seconds since the epoch)."""


@dataclass(frozen=True)
class GapModel:
    """Seconds between calls where a transcript has no clock, and long pauses."""

    gap: float = 10.0
    """Seconds between the calls of a transcript without timestamps."""
    pause_share: float = 0.0
    """Share of calls (after the first) preceded by a pause of ``pause`` seconds."""
    pause: float = 600.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.pause_share <= 1:
            raise ValueError(
                f"pause share {self.pause_share} is not a share from 0 to 1"
            )
        if self.gap < 0 or self.pause < 0:
            raise ValueError("gaps and pauses are seconds, at least 0")

    @property
    def name(self) -> str:
        """How the results name it: ``real``, or ``pauses:SHARE:SECONDS``."""
        if not self.pause_share:
            return "real"
        return f"pauses:{self.pause_share:g}:{self.pause:g}"

    @classmethod
    def parse(cls, text: str) -> GapModel:
        """``real``, or ``pauses:SHARE:DURATION`` (``pauses:0.05:10m``).

        Raises ``ValueError`` naming the expected form.
        """
        kind, _, rest = text.strip().partition(":")
        if kind == "real" and not rest:
            return cls()
        share, _, pause = rest.partition(":")
        try:
            if kind != "pauses":
                raise ValueError
            value, length = float(share), seconds(pause)
        except ValueError:
            raise ValueError(
                f"invalid gap model {text!r}; expected 'real' or "
                "'pauses:SHARE:DURATION', e.g. pauses:0.05:10m"
            ) from None
        return cls(pause_share=value, pause=length)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3_600.0}


def seconds(text: str) -> float:
    """A duration as ``300``, ``300s``, ``5m`` or ``1h``, in seconds (at least 0).

    Raises ``ValueError`` naming the expected form.
    """
    clean = text.strip().lower()
    unit = _UNITS.get(clean[-1:], 0.0)
    try:
        value = float(clean[:-1] if unit else clean) * (unit or 1.0)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"invalid duration {text!r}; expected seconds like 300, 5m or 1h"
        )
    return value


def call_times(
    name: str, messages: Sequence[BaseMessage], calls: Sequence[int], gaps: GapModel
) -> list[float]:
    """The time (seconds) of each call, whose reply is ``messages[k]`` for ``calls``.

    The replies' own timestamps when every one has one, else ``gaps.gap`` apart;
    then ``gaps``'s pauses, seeded by ``name`` and ``gaps.seed``.
    """
    stamps = [messages[k].response_metadata.get(CREATED) for k in calls]
    if all(type(s) in (int, float) for s in stamps):
        times = [float(s) for s in stamps]  # type: ignore[arg-type]
    else:
        times = [n * gaps.gap for n in range(len(calls))]
    if not gaps.pause_share:
        return times
    draw = random.Random(f"{gaps.seed}:{name}").random
    shift, out = 0.0, []
    for n, at in enumerate(times):
        if n and draw() < gaps.pause_share:
            shift += gaps.pause
        out.append(at + shift)
    return out


def expired(times: Sequence[float], ttl: float | None) -> list[bool]:
    """Whether each call came more than ``ttl`` seconds after the one before it."""
    if ttl is None:
        return [False] * len(times)
    return [n > 0 and at - times[n - 1] > ttl for n, at in enumerate(times)]
