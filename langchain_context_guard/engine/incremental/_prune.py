"""One pruning: the passes at a setting, with fallbacks when what must stay is over.

``ContextGuard.prepare`` calls ``prune`` when the stable prefix cannot be reused:
it runs the passes (``_run.Run``, growing the previous call's steps from
``record`` when the history only grew) at the target (``_cost_model``), then at the
full budget, then with less room for the digest (``digest_fallbacks``), then
dropping the calls of ``drop_last`` tools like the rest; the last try's
``BudgetExceededError`` propagates. A pruning that falls well short of its
target is weighed against the cut just above it (``_nearer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from langchain_core.messages import BaseMessage

from .._errors import BudgetExceededError
from ..passes._setting import Setting, digest_fallbacks
from ..tokens._anchor import Scan
from ._cost_model import cycle_cost, growth, prune_share
from ._extends import recent_contents
from ._order import PASSES
from ._record import CallKey, Memo, Record, RunKey
from ._run import Run
from ._steps import HeadForgotten, Step


def prune(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
    enabled: bool,
) -> tuple[Run, Record | None]:
    """The run that fits, and the record to keep for the next call (or None).

    ``setting.exact`` asks for a pruning to the cost model's depth: ``budget``
    is then the full budget, and the target is found here (``_target``).
    A step that would read what ``_release`` let go of runs it all afresh.
    """
    try:
        run, kept = _prune(original, scan, setting, record, key, enabled)
    except HeadForgotten:
        return _prune(original, scan, setting, None, key, enabled)
    if record is not None and kept is not None and record.forgot:
        first = kept.steps[0]
        if first.grown or first is record.steps[0]:  # grown from what it let go of
            kept = replace(kept, forgot=record.forgot)
    return run, kept


def _prune(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
    enabled: bool,
) -> tuple[Run, Record | None]:
    before: Sequence[Step] | None = None
    if setting.exact and enabled:
        setting, before = _target(original, scan, setting, record, key)
    tries = [setting]
    if setting.exact:
        tries.append(replace(setting, budget=key.budget, exact=False))
    tries += [replace(tries[-1], digest=room) for room in digest_fallbacks(setting)]
    tries.append(replace(tries[-1], hold=False))
    for n, attempt in enumerate(tries, start=1):
        last = n == len(tries)
        if n == 1 and attempt.exact and enabled:
            attempt, done = _deepest(original, scan, attempt, record, key, before)
        else:
            done = _run(
                original, scan, attempt, record, key, last, enabled, None, before
            )
        if done is not None:
            if not (attempt.exact and enabled):
                return done
            return _nearer(original, scan, attempt, record, key, done)
    raise AssertionError("the last try raises")  # pragma: no cover


def _deepest(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
    before: Sequence[Step] | None,
) -> tuple[Setting, tuple[Run, Record | None] | None]:
    """The pruning at the target, or as near below the budget as what must stay.

    When the system prompt, the task and the newest turn alone are over the
    cost model's target (a long system prompt, a large newest result), the cut
    goes as deep as they allow: the share the model asked for is out of reach,
    and the nearest share to it bills the least (``cycle_cost`` grows above
    it). Pruning only to the budget instead would leave no room to grow, and
    the next call would prune again, re-sending the prompt at full price.
    None (with the setting) when not even the budget holds what must stay.
    """
    try:
        return setting, _run(
            original, scan, setting, record, key, True, True, None, before
        )
    except BudgetExceededError as error:
        floor = min(error.tokens + setting.digest, key.budget)
        if floor >= key.budget:
            return setting, None
        deepest = replace(setting, budget=floor)
        return deepest, _run(
            original, scan, deepest, record, key, False, True, None, before
        )


_COMPRESS = PASSES.index("compress")
"""The passes before it (sanitize, repair, truncate) do not depend on the budget."""


def _target(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
) -> tuple[Setting, Sequence[Step] | None]:
    """The setting at the cost model's depth, and the steps that found it.

    The growth per call is the history as the prompt holds it: the passes up to
    the truncation run first (grown from ``record``'s, so only new messages cost)
    and their tokens, over the assistant messages, are the model's g. Those
    steps do not depend on the budget; unless the record has them too, the
    first try takes them as they are.
    """
    steps = None
    if record is not None and record.key.call == key:
        steps = record.steps[:_COMPRESS]
    alike = record is not None and record.key.call.counts_alike(key)
    memo = record.memo if record is not None and alike else None
    head = Run(original, scan.body, setting, steps, memo)
    head.run(_COMPRESS)
    g = growth(head.body, scan.calls)
    budget = setting.budget
    target = min(int(prune_share(setting.policy.prune_to, g, budget) * budget), budget)
    target = min(target + setting.digest, budget)
    deeper = replace(setting, budget=target, exact=target < budget, growth=g)
    return deeper, (head.steps if steps is None else None)


def _nearer(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
    done: tuple[Run, Record | None],
) -> tuple[Run, Record | None]:
    """The better of the cuts on either side of the target, by the cost model.

    Whole turns go, so the first cut within the target falls below it by up to
    a turn; a turn is the history's growth per call (``_cost_model.growth``),
    the cost model's g. A cut short by more than that had a larger turn in the
    way (one just before the kept ones can leave little but the task): the cut
    as far above the target is tried too (within the budget), and the one with
    the lower ``cycle_cost`` is taken. Above, more context is kept; but the next
    pruning, which re-sends the prompt at full price, comes sooner.
    """
    short = setting.budget - done[0].now
    turn = setting.growth
    if turn is None or short <= turn * setting.gauge.scale:
        return done
    wider = replace(setting, budget=min(setting.budget + short, key.budget))
    first = done[0]
    before = first.steps[: PASSES.index("trim")]  # the passes before the trim
    alt = _run(original, scan, wider, record, key, False, True, first.memo, before)
    if alt is None or alt[0].now <= first.now:
        return done
    g, budget = turn * setting.gauge.scale, key.budget
    below, above = cycle_cost(first.now, g, budget), cycle_cost(alt[0].now, g, budget)
    return alt if above < below else done


def _run(
    original: list[BaseMessage],
    scan: Scan,
    setting: Setting,
    record: Record | None,
    key: CallKey,
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
    run_key = RunKey(key, setting.budget, setting.digest, setting.exact, setting.hold)
    # Per-message results depend on the policy and the counter, not the budget.
    if memo is None and record is not None and record.key.call.counts_alike(key):
        memo = record.memo
    steps = before
    if steps is None and record is not None:
        if record.key == run_key:
            steps = record.steps
        elif record.key.call == key:
            # Another target (the cost model's depth moved): the passes before
            # the trim do not depend on it; grow those.
            steps = record.steps[: PASSES.index("trim")]
    run = Run(original, scan.body, setting, steps, memo)
    if not enabled:
        return run, None
    try:
        run.run()
    except BudgetExceededError:
        if last:
            raise
        return None
    if run.steps and not run.first("repair").state.open:
        contents = recent_contents(original)
        return run, Record(
            key=run_key,
            original=original,
            contents=contents,
            body=scan.body,
            usage_at=scan.usage_at,
            usage_body=scan.usage_body,
            calls=scan.calls,
            steps=tuple(run.steps),
            memo=run.memo,
        )
    return run, None
