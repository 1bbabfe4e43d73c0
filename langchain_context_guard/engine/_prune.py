"""One pruning: the passes at a setting, with fallbacks when what must stay is over.

``ContextGuard.prepare`` calls ``prune`` when the stable prefix cannot be reused:
it runs the passes (``_pipeline.Run``, growing the previous call's steps from
``record`` when the history only grew) at the target, then at the full budget,
then without room for the digest; the last try's ``BudgetExceededError``
propagates. A pruning that falls well short of its target is weighed against
the cut just above it (``_nearer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage

from ._anchor import Scan
from ._depth import growth
from ._errors import BudgetExceededError
from ._passes import PASSES
from ._pipeline import Memo, Record, Run, Setting
from ._same import recent_contents
from ._stages import Step


def prune(
    original: list[BaseMessage],
    scan: Scan,
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
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: tuple[Any, ...],
    done: tuple[Run, Record | None],
) -> tuple[Run, Record | None]:
    """The cut nearest the target, from below or above.

    Whole turns go, so the first cut within the target falls below it by up to
    a turn; an average turn is the history's growth per call (``_depth.growth``),
    the cost model's g. A cut short by more than that had a larger turn in the
    way (one just before the kept ones can leave little but the task): the cut
    as far above the target is tried too (within the budget), and the one
    keeping more is taken, as it misses the target by no more.
    """
    short = setting.budget - done[0].now
    turn = growth(scan[0], scan[3])
    if turn is None or short <= turn * setting.gauge.scale:
        return done
    wider = replace(setting, budget=min(setting.budget + short, key[2]))
    first = done[0]
    before = first.steps[: PASSES.index("trim")]  # the passes before the trim
    alt = _run(original, scan, wider, record, key, False, True, first.memo, before)
    return alt if alt is not None and alt[0].now > first.now else done


def _run(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: tuple[Any, ...],
    last: bool,
    enabled: bool,
    memo: Memo | None = None,
    before: Sequence[Step] | None = None,
) -> tuple[Run, Record | None] | None:
    """The passes at ``setting``'s budget.

    None when what must be kept does not fit and this is not the ``last`` try;
    on the last, ``BudgetExceededError`` propagates. ``memo``: per-message
    results of this very history (a second try), else the record's; ``before``:
    a second try's steps of the passes before the trim, over this very history
    (they do not depend on the budget, but for compression's trigger: ``Run``
    takes them as they are where they apply), else the record's.
    """
    base, key = key, (*key, setting.budget, setting.digest, setting.exact)
    # Per-message results depend on the policy and the counter, not the budget.
    if memo is None and record is not None and record.key[:2] == key[:2]:
        memo = record.memo
    steps = before
    if steps is None and record is not None:
        if record.key == key:
            steps = record.steps
        elif record.key[: len(base)] == base:
            # Another target (the cost model's depth moved): the passes before
            # the trim do not depend on it; grow those.
            steps = record.steps[: PASSES.index("trim")]
    run = Run(original, scan[0], setting, steps, memo)
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
        return run, Record(key, original, contents, *scan, tuple(run.steps), run.memo)
    return run, None
