"""Handing a conversation to another process: many workers, one prompt.

Behind LangGraph Server or any pool of workers, the steps of one thread run in
whichever process is free, or after a restart. What the guard keeps in memory
to send the same prompt on the next step (``_stable``: the previous prompt,
extended while it fits) must then travel with the thread. It is small and
derived: ``ContextGuard.export_state`` gives, after a ``prepare``, the length of
the history last pruned afresh (``base``; the prompt is that prune plus the
later messages, each through the per-message passes) and our count of the
prompt (``sent``, for usage anchoring). The adapters store it in the reply's
``response_metadata``; ``ContextGuard.restore_state`` takes the records back and,
when the guard does not hold that prompt, rebuilds it by pruning the history
up to ``base`` again: the passes are deterministic and the anchors' counts are
restored first, so the rebuilt prompt is byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from langchain_core.messages import BaseMessage

from ._stable import Sent

STATE_KEY = "context_guard"
"""Where the adapters keep the record in a reply's ``response_metadata``."""


def record(
    sent: tuple[int, bool] | None, base: int | None, ratio: float | None
) -> dict[str, Any]:
    """The JSON record of one prepared prompt (keys only for what is known).

    ``ratio`` is the provider/our count ratio the guard carries after it: it
    decides between readings of the next reply's usage (``_anchor.make_gauge``).
    """
    state: dict[str, Any] = {}
    if sent is not None:
        state["sent"] = [sent[0], sent[1]]
    if base is not None:
        state["base"] = base
    if ratio is not None:
        state["ratio"] = ratio
    return state


def ratio_before(states: Mapping[int, Mapping[str, Any]], at: int) -> float | None:
    """The ratio carried after the last recorded prompt before index ``at``."""
    prior = max((i for i in states if i < at), default=None)
    return None if prior is None else states[prior].get("ratio")


def set_ratio(
    ratios: MutableMapping[str, float], name: str, ratio: float | None
) -> None:
    """Carry ``ratio`` for ``name`` (or none)."""
    if ratio is None:
        ratios.pop(name, None)
    else:
        ratios[name] = float(ratio)


def sent_counts(
    original: list[BaseMessage],
    states: Mapping[int, Mapping[str, Any]],
    key_of: Callable[[BaseMessage], tuple[Any, ...]],
) -> list[tuple[tuple[Any, ...], tuple[int, bool]]]:
    """Our counts of the prompts before each recorded reply, keyed as ``_sent``."""
    out: list[tuple[tuple[Any, ...], tuple[int, bool]]] = []
    for at, state in states.items():
        sent = state.get("sent")
        if sent is not None and 0 < at <= len(original) and original[at - 1].id:
            out.append((key_of(original[at - 1]), (int(sent[0]), bool(sent[1]))))
    return out


def latest_base(states: Mapping[int, Mapping[str, Any]]) -> tuple[int, int] | None:
    """The latest reply's index and the ``base`` its prompt extended, if any."""
    last = max(states, default=0)
    base = states[last].get("base") if last else None
    if not isinstance(base, int) or not 0 < base <= last:
        return None
    return last, base


def stale(mine: Sent | None, original: list[BaseMessage], last: int, base: int) -> bool:
    """Whether the prompt a guard holds is not the one the records describe."""
    if mine is None or mine.base != base:
        return True
    return mine.tail(original[:last]) is None
