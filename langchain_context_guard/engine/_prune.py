"""One pruning: the passes at a setting, with fallbacks when what must stay is over.

``ContextGuard.prepare`` calls ``prune`` when the stable prefix cannot be reused:
it runs the passes (``_pipeline.Run``, growing the previous call's steps from
``record`` when the history only grew) at the target, then at the full budget,
then without room for the digest; the last try's ``BudgetExceededError``
propagates. A pruning that falls well short of its target is weighed against
the cut just above it (``_nearer``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from ._errors import BudgetExceededError
from ._pipeline import Record, Run, Setting
from ._same import recent_contents

NEAR = 0.1
"""Share of its target a pruning may fall short by before the cut above is tried
(a smaller miss changes the kept context and the bill by under a tenth)."""


def prune(
    original: list[BaseMessage],
    scan: tuple[int, int, int],
    setting: Setting,
    record: Record | None,
    key: tuple[Any, ...],
    enabled: bool,
) -> tuple[Run, Record | None]:
    """The run that fits, and the record to keep for the next call (or None)."""
    tries = [setting]
    if setting.exact:
        tries.append(replace(setting, budget=key[2], exact=False))
    if setting.digest:
        tries.append(replace(tries[-1], digest=0))
    for n, attempt in enumerate(tries, start=1):
        done = _run(original, scan, attempt, record, key, n == len(tries), enabled)
        if done is not None:
            if not (attempt.exact and enabled):
                return done
            return _nearer(original, scan, attempt, record, key, done)
    raise AssertionError("the last try raises")  # pragma: no cover


def _nearer(
    original: list[BaseMessage],
    scan: tuple[int, int, int],
    setting: Setting,
    record: Record | None,
    key: tuple[Any, ...],
    done: tuple[Run, Record | None],
) -> tuple[Run, Record | None]:
    """The cut nearest the target, from below or above.

    Whole turns go, so the first cut within the target can fall far below it (a
    large turn just before the kept ones): the cost model's depth is then missed
    by a turn. When it falls short by more than ``NEAR`` of the target, the cut
    as far above the target is tried too (within the budget), and the one
    keeping more is taken: it misses the target by no more.
    """
    short = setting.budget - done[0].now
    if short <= NEAR * setting.budget:
        return done
    wider = replace(setting, budget=min(setting.budget + short, key[2]))
    alt = _run(original, scan, wider, record, key, False, True)
    return alt if alt is not None and alt[0].now > done[0].now else done


def _run(
    original: list[BaseMessage],
    scan: tuple[int, int, int],
    setting: Setting,
    record: Record | None,
    key: tuple[Any, ...],
    last: bool,
    enabled: bool,
) -> tuple[Run, Record | None] | None:
    """The passes at ``setting``'s budget.

    None when what must be kept does not fit and this is not the ``last`` try;
    on the last, ``BudgetExceededError`` propagates.
    """
    key = (*key, setting.budget, setting.digest, setting.exact)
    if record is not None and record.key != key:
        record = None
    run = Run(original, scan[0], setting, record.steps if record is not None else None)
    if not enabled:
        return run, None
    try:
        run.run()
    except BudgetExceededError:
        if last:
            raise
        return None
    if run.steps and not run.steps[1].state.open:
        contents = recent_contents(original)
        return run, Record(key, original, contents, *scan, tuple(run.steps))
    return run, None
