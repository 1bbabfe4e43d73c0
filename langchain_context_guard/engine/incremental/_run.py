"""The passes of ``prepare`` (``_order.PASSES``), each run in full or grown.

``_order`` says what each pass does and why this order; this is how. A pass
grows its previous step when its input extends that step's input; its output then
extends the previous output unless it moved a boundary, and the passes after it
grow in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from functools import partial

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._events import NO_EDITS, EventKind
from .._messages import NONE, holds_reply, is_pinned
from .._result_keys import naming, result_ordinals
from .._tool_policy import last_tools, supersede_keys, tool_keeps, whole_tools
from ..passes._bound_thinking import joined_behind_words
from ..passes._compress import squeezer
from ..passes._digest_turns import turns_form
from ..passes._hygiene import history_start, opens_with_user, tidy_message
from ..passes._sanitize import clean_message
from ..passes._setting import Setting
from ..passes._supersede import superseded_reads
from ..passes._thinking import signed_stays
from ..passes._trim_costs import message_costs
from ..passes._trim_sizes import Costs
from ..passes._trim_units import (
    awaits_answer,
    held_codes,
    reasoning_kind,
    remap,
    remap_at,
)
from ..passes._trim_units import kind as kind_of
from ._digest_step import digest_step, read_from
from ._extends import extends
from ._first_run import rewriters, rewrites
from ._native_steps import bound_step, compaction_step
from ._order import PASSES
from ._record import Memo
from ._ruled_compress import ruled_compress_step
from ._steps import (
    HeadForgotten,
    Step,
    compress_step,
    hygiene_step,
    map_step,
    repair_step,
)
from ._strip_step import strip_step
from ._trim_step import grow_trim, trim_step

_TRIM = PASSES.index("trim")


class Run:
    """One call's passes over ``original``, growing ``previous`` steps if given.

    ``memo``: per-message results of a previous call over a history this one
    extends unchanged (``Record.memo``), reused by object identity.
    """

    def __init__(
        self,
        original: list[BaseMessage],
        body: int,
        setting: Setting,
        previous: Sequence[Step] | None,
        memo: Memo | None = None,
    ) -> None:
        self.original = original
        self.setting = setting
        self.previous = previous
        self.memo: Memo = dict(memo or {})
        self.steps: list[Step] = []
        self.tokens: list[int] = []
        self.source = original
        self.body = body
        self.intact = len(original)
        self.before = setting.gauge.tokens(body, len(original))
        self.linked = previous is not None
        self._truncated = original
        self.stale = 0
        """How many of ``source``'s first places ``_release`` may have emptied."""
        self._cut_stale = 0  # ``stale`` of the trim's input, which the digest reads
        self._twins: dict[str, int] = {}  # synthetic results' tokens, by tool name
        p = setting.policy
        self._truncator, self._compressor = rewriters(
            p, setting.window, setting.count, setting.ordinals
        )
        self._named = naming(p.archived_results, setting.ordinals)
        self._keep_whole = whole_tools(p)
        self._tool_keep, self._supersede = tool_keeps(p), supersede_keys(p)
        self._newer: dict[int, str] | None = None  # superseded reads of ``_truncated``
        self._held = last_tools(p)

    @property
    def now(self) -> int:
        """Tokens of the current history."""
        return self.tokens[-1] if self.tokens else self.before

    def _prev(self) -> Step | None:
        """The previous call's step for the next pass, if this input extends it."""
        if self.previous is None or len(self.steps) >= len(self.previous):
            return None
        prev = self.previous[len(self.steps)]
        if self.linked or extends(self.source, prev.source):
            return prev
        return None

    def _add(self, step: Step) -> None:
        if step.result is not self.source:
            if self.stale and not step.stale and step.kind != "trim":
                raise HeadForgotten  # a pass ran in full over emptied places
            self.stale = step.stale
        self.linked = step.grown
        self.steps.append(step)
        self.body += step.delta
        self.intact = min(self.intact, step.diff)
        self.source = step.result
        if step.kind == "truncate":
            self._truncated = step.result
        self.tokens.append(self.setting.gauge.tokens(self.body, self.intact))

    def measure(self, messages: list[BaseMessage]) -> int:
        """Tokens that must fit, of any history from the original (counts all)."""
        original = self.original
        intact = next(
            (
                i
                for i, (a, b) in enumerate(zip(messages, original, strict=False))
                if a is not b
            ),
            min(len(messages), len(original)),
        )
        body = sum(map(self.setting.count, messages)) + self._lead_extra(messages)
        return self.setting.gauge.planned(body, intact)

    def run(self, until: int = len(PASSES)) -> list[BaseMessage]:
        """The passes, in the order of ``PASSES`` (the first ``until`` of them)."""
        steps: dict[EventKind, Callable[[], None]] = {
            "sanitize": self._sanitize,
            "provider_compaction": self._provider_compaction,
            "bound_thinking": self._bound_thinking,
            "repair": self._repair,
            "truncate": self._truncate,
            "compress": self._compress,
            "strip_thinking": self._strip_thinking,
            "trim": self._trim,
            "digest": self._digest,
            "hygiene": self._hygiene,
        }
        for kind in PASSES[:until]:
            same = self._same(kind)
            if same is not None:
                self._add(same)
            else:
                steps[kind]()
        return self.source

    def _same(self, kind: EventKind) -> Step | None:
        """The previous step for ``kind`` if over this very list and still right.

        A second try at another budget (``_prune._nearer``) is given the first
        try's steps before the trim: they do not depend on the budget, but for
        compression's trigger.
        """
        n = len(self.steps)
        if self.previous is None or n >= min(len(self.previous), _TRIM):
            return None
        prev = self.previous[n]
        if prev.source is not self.source:
            return None
        return (
            prev if kind != "compress" or prev.state.active != self._quiet() else None
        )

    def _sanitize(self) -> None:
        count = self.setting.count
        self._add(map_step("sanitize", self.source, clean_message, count, self._prev()))

    def _provider_compaction(self) -> None:
        self._add(compaction_step(self.source, self.setting.count, self._prev()))

    def _bound_thinking(self) -> None:
        prev = self._prev()
        # Grown: its input grows the last one's, and neither call changed a thing.
        grown = prev is not None and prev.result is prev.source
        if not self.setting.policy.bound_thinking:
            step = Step("bound_thinking", self.source, self.source, NO_EDITS, 0)
            self._add(replace(step, grown=grown))
            return
        repair = self.first("repair")
        produced = self.setting.produced
        if produced is None:  # the history as read: compared from the first edit
            after = self.steps.index(repair) + 1
            start = min((step.diff for step in self.steps[after:]), default=NONE)
            produced = repair.result
            # A join at hygiene is an edit too (``joined_behind_words``).
            start = min(start, joined_behind_words(self.source))
        elif self.stale:
            raise HeadForgotten  # compared from the start: emptied places too
        else:
            start = 0
        step = bound_step(self.source, produced, start, self.setting.count, self.stale)
        self._add(replace(step, grown=grown and step.result is step.source))

    def _repair(self) -> None:
        prev, count = self._prev(), self.setting.count
        grown = repair_step(self.source, count, prev) if prev is not None else None
        self._add(grown or _full(repair_step(self.source, count)))

    def _truncate(self) -> None:
        count, prime = self.setting.count, self.setting.prime
        if prime is not None and self.previous is None:  # in one batch (``_first_run``)
            assistant = self.setting.policy.compress_assistant_text
            prime(rewrites(self.source, self._truncator, self._compressor, assistant))
        self._add(
            map_step("truncate", self.source, self._truncator, count, self._prev())
        )

    def _strip_thinking(self) -> None:
        keep = self.setting.policy.keep_recent_thinking
        prev, codes = self._prev(), None
        if prev is None:
            kinds = remap(self.source, self.memo.get("reasoning"), reasoning_kind)
            self.memo["reasoning"] = (self.source, kinds)
            codes = "".join(kinds)
        signed = signed_stays(self.setting.policy)
        count = self.setting.count
        self._add(strip_step(self.source, keep, count, prev, codes, signed))

    def _hygiene(self) -> None:
        prev, count = self._prev(), self.setting.count
        bound = self.setting.policy.bound_thinking is True
        hygiene = partial(hygiene_step, removed=self._opened(), bound=bound)
        grown = hygiene(self.source, count, prev) if prev is not None else None
        self._add(grown or _full(hygiene(self.source, count)))

    def _opened(self) -> bool:
        """Whether the history as repaired opens with a user message (or none)."""
        return opens_with_user(self.first("repair").result)

    def first(self, kind: EventKind) -> Step:
        """This run's first step of the pass ``kind``."""
        return next(step for step in self.steps if step.kind == kind)

    def _lead_extra(self, messages: list[BaseMessage], start: int = 0) -> int:
        """Tokens hygiene will add: the placeholder, and empty results from ``start``.

        Budgeted before it runs, so what is sent stays within the budget.
        """
        count = self.setting.count
        extra = 0
        if not opens_with_user(messages):
            extra += count(history_start(self._opened()))
        for i in range(start, len(messages)):
            m = messages[i]
            if isinstance(m, ToolMessage) and not m.content:
                new = tidy_message(m)
                extra += count(new) - count(m) if new is not None else 0
        return extra

    def _quiet(self) -> bool:
        """Whether compression waits: the history is within its trigger.

        As sent: with what hygiene adds (never less), so a prepared output
        compresses alike; counted only when it can decide.
        """
        limit = self.setting.policy.compress_trigger * self.setting.budget
        quiet = bool(limit) and self.now <= limit
        return quiet and self.now + self._lead_extra(self.source) <= limit

    def _compress(self) -> None:
        p = self.setting.policy
        run = partial(
            compress_step,
            active=not self._quiet(),
            keep=p.keep_recent_tool_results,
            batch=p.compress_batch,
            compress=self._compressor,
            count=self.setting.count,
            assistant=p.compress_assistant_text,
        )
        if self._tool_keep or self._supersede:
            run = partial(
                ruled_compress_step,
                **run.keywords,
                keep_whole=self._keep_whole,
                tool_keep=self._tool_keep,
                supersede=self._supersede,
                name_source=self._named,
            )
        prev = self._prev()
        step = run(self.source, prev=prev) if prev is not None else None
        self._add(step or _full(run(self.source)))

    def _costs(self, messages: list[BaseMessage], i: int) -> Costs:
        """``message_costs`` with this run's counter and compression."""
        assistant = self.setting.policy.compress_assistant_text
        count, compress, twins = self.setting.count, self._compressor, self._twins
        newer = self._superseded() if self._supersede else None
        return message_costs(
            messages, i, count, compress, assistant, twins, newer, self._named
        )

    def _superseded(self) -> dict[int, str]:
        """``superseded_reads`` of the truncated history (read once per run)."""
        if self._newer is None:
            keys, whole = self._supersede, self._keep_whole
            self._newer = superseded_reads(self._truncated, keys, whole)
        return self._newer

    def _trim(self) -> None:
        self._cut_stale = self.stale
        truncated = self._truncated
        s, p, gauge = self.setting, self.setting.policy, self.setting.gauge
        room = gauge.room(s.budget)
        cut_budget = s.budget - s.digest
        cut_room = gauge.room(cut_budget) if s.digest else None
        keep, batch = p.keep_recent_tool_results, p.compress_batch
        prev = self._prev()
        moved = self._moved_reads()
        if prev is not None and not moved and not self._holds(prev):
            start = len(prev.source)
            new = range(start, len(truncated))
            sizes = prev.state.sizes.grow(self._costs(truncated, i) for i in new)
            step = grow_trim(prev, self.source, sizes, room=room, cut_room=cut_room)
            if step is not None:
                extra = self._lead_extra(step.result, len(prev.result))
                body = self.body + step.delta + extra
                intact = min(self.intact, step.diff)
                limit = cut_budget if step.state.dropped else s.budget
                if gauge.planned(body, intact) <= limit:
                    self._add(step)
                    return
        costs: list[Costs] = remap_at(truncated, self.memo.get("costs"), self._costs)
        if moved:
            costs = list(costs)
            for i in moved:
                if i < len(costs):
                    costs[i] = self._costs(truncated, i)
        codes = remap(self.source, self.memo.get("kinds"), kind_of)
        self.memo["costs"] = (truncated, costs)
        self.memo["kinds"] = (self.source, codes)
        step = trim_step(
            self.source,
            costs,
            room=room,
            quantum=0.0 if s.exact else p.trim_step * s.budget,
            keep=keep,
            batch=batch,
            keep_first_user=p.keep_first_user,
            turn_limit=s.turn_limit,
            budget=s.budget,
            window=s.window,
            measure=self.measure,
            cost=lambda m: gauge.cost(s.count(m)),
            squeeze=squeezer(p, s.window, s.ordinals),
            count=s.count,
            source_tokens=self.body,
            cut_room=cut_room,
            cut_budget=cut_budget,
            codes=self._held_codes("".join(codes)),
            lead=0 if self._opened() else s.count(history_start(False)),
            memo=self.memo,
            policy=p,
            named=self._named,
        )
        state = step.state
        # Kept: the protected messages (never emptied) and all after the cut.
        if self.stale and (
            not state.dropped or max(state.plan.units[state.dropped - 1]) < self.stale
        ):
            raise HeadForgotten  # the cut reaches back into emptied places
        self._add(step)

    def _held_codes(self, codes: str) -> str:
        """The kinds with what the trim holds while it can (``Setting.hold``)."""
        if not self.setting.hold:
            return codes
        reply = self.setting.policy.keep_reply
        return held_codes(self.source, codes, self._held, reply)

    def _holds(self, prev: Step) -> bool:
        """Whether what the trim holds changes with the new messages.

        The units change with a new call of a ``drop_last`` tool, a step after
        a reply whose question was held, a newer reply where the newest is held
        (``keep_reply``: the one held before can go), or a new step after a
        held or pinned pair that follows the latest step: that step becomes
        droppable, and a size settled within the pair after it (a compression
        batch, a result smaller than its synthetic one) could have been met by
        dropping it.
        """
        n = len(prev.source)
        if len(self.source) == n:
            return False
        hold = self.setting.hold
        if hold and awaits_answer(prev.source):
            return True
        reply = hold and self.setting.policy.keep_reply
        if reply and holds_reply(self.source, n):
            return True
        tools = self._held if hold else ()
        tail = self.source[n:]
        if not any(isinstance(m, AIMessage) for m in tail):
            return False
        if any(_calls_any(m, tools) for m in tail):
            return True
        units = prev.state.plan.units
        after = units[-1][-1] + 1 if units else 0
        if reply and holds_reply(prev.source, after):  # the held reply is after
            return True
        return any(is_pinned(m) or _calls_any(m, tools) for m in prev.source[after:])

    def _moved_reads(self) -> list[int]:
        """Results whose superseded pointer changed since the held costs.

        Their costs change while the message does not: a later call read the
        same thing again (``_supersede``).
        """
        if not self._supersede:
            return []
        newer = self._superseded()
        held = self.memo.get("superseded", {})
        self.memo["superseded"] = newer
        return sorted(i for i in {*newer, *held} if newer.get(i) != held.get(i))

    def _digest(self) -> None:
        s, p = self.setting, self.setting.policy
        original = self.original

        def ordinals() -> Mapping[str, int]:
            return s.ordinals or result_ordinals(original)

        keys = ordinals if p.archived_results else None

        step = digest_step(
            self.steps[-1],
            max_tokens=int(s.digest / (s.gauge.scale * (1 + s.gauge.margin))),
            count=s.count,
            call_chars=p.digest_call_chars,
            sources=p.archived_results,
            originals=lambda: {m.id: m for m in original if m.id},
            ordinals=keys,
            prev=self._prev(),
            turns=(lambda: turns_form(p, s.window, keys() if keys else None))
            if p.digest_form == "turns"
            else None,
        )
        read = read_from(step)
        if not step.grown and read is not None and read < self._cut_stale:
            raise HeadForgotten  # the turns digest read a place let go of
        self._add(step)


def _full(step: Step | None) -> Step:
    assert step is not None  # a pass run in full always gives a step
    return step


def _calls_any(message: BaseMessage, tools: Collection[str]) -> bool:
    """Whether ``message`` is an assistant message calling one of ``tools``."""
    return (
        bool(tools)
        and isinstance(message, AIMessage)
        and any(c["name"] in tools for c in message.tool_calls)
    )
