"""The replay loop: each transcript, call by call, under every strategy.

The ``replay`` module docstring says what a prompt is and how it is sized.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ..engine import REPLY_OVERHEAD, TiktokenCounter, result_key, result_ordinals
from ._metrics import (
    COUNTERS,
    billed_input,
    cached_prefix,
    counter_errors,
    from_history,
    identifiers,
    message_key,
    message_text,
    pointers,
    strip_notes,
    tool_pairing_errors,
)
from ._needles import Needle, ask_plan
from ._progress import Progress, quiet_guard_log
from ._results import ReplayResult, Tally
from ._signed import Binding, with_signed_thinking
from ._strategies import STRATEGIES, Prompt, Strategy, default_reserve, make_strategies
from ._summarizer import PROVIDER
from ._timing import GapModel, call_times, expired

WINDOWS = (16_000, 32_000, 128_000)
"""Windows the benchmark replays at by default."""


class _Lived:
    """The history as one strategy's agent records it, reply usage included."""

    def __init__(self, source: list[BaseMessage], feedback: bool) -> None:
        self.source, self.feedback = source, feedback
        self.items: list[BaseMessage] = []
        self.sent: dict[int, int] = {}

    def history(self, k: int) -> list[BaseMessage]:
        for j in range(len(self.items), k):
            message = self.source[j]
            if self.feedback and j in self.sent and isinstance(message, AIMessage):
                message = _with_input_tokens(message, self.sent[j])
            self.items.append(message)
        return list(self.items)


def _with_input_tokens(message: AIMessage, tokens: int) -> AIMessage:
    usage: Any = dict(message.usage_metadata or {})
    if not usage:
        return message
    usage["input_tokens"] = tokens
    usage["total_tokens"] = tokens + int(usage.get("output_tokens") or 0)
    meta = {**message.response_metadata, "prompt_tokens": tokens}
    return message.model_copy(
        update={"usage_metadata": usage, "response_metadata": meta}
    )


def _with_provider(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [
        m.model_copy(
            update={
                "response_metadata": {**m.response_metadata, "model_provider": PROVIDER}
            }
        )
        if isinstance(m, AIMessage) and m.usage_metadata
        else m
        for m in messages
    ]


class _Info(NamedTuple):
    """What the replay needs of one message, computed once per content."""

    tokens: int
    key: tuple[str, ...]
    ids: frozenset[str]
    """Identifiers of all its text (the "notes included" figure)."""
    text: str
    """Its text without truncation/compression markers."""
    clean_ids: frozenset[str]
    """Identifiers of ``text``."""


class _Measure:
    """Per-message tokens, cache key and identifiers, cached by content."""

    def __init__(self, counter: TiktokenCounter) -> None:
        self.counter = counter
        self.by_id: dict[int, tuple[BaseMessage, _Info]] = {}
        self.by_key: dict[tuple[str, ...], _Info] = {}

    def __call__(self, m: BaseMessage) -> _Info:
        hit = self.by_id.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        key = message_key(m)
        info = self.by_key.get(key)
        if info is None:
            text = message_text(m)
            clean = strip_notes(text)
            ids = identifiers(text)
            info = _Info(
                self.counter.count_message(m),
                key,
                ids,
                clean,
                ids if clean == text else identifiers(clean),
            )
            self.by_key[key] = info
        self.by_id[id(m)] = (m, info)
        return info


@dataclass(frozen=True)
class _Call:
    k: int
    scale: float
    earlier: dict[str, str]
    """Identifiers of the action seen earlier, each with the line it first was in."""
    needles: tuple[Needle, ...]
    at: float
    """When the call is made, in seconds (``_timing``)."""
    cold: bool
    """It comes after the provider's cache expired: nothing is billed as cached."""
    sources: dict[int, str | None]
    """The message id of each needle's source, by its index."""
    call_ids: dict[int, str]
    """The tool call id of each needle's source, by its index."""
    keys: dict[int, str]
    """The result key of each needle's source (``result_key``), by its index:
    the history only grows, so an archive would hold it under this key."""


def _call_id(message: BaseMessage) -> str:
    return message.tool_call_id if isinstance(message, ToolMessage) else ""


def _first_lines(text: str) -> dict[str, str]:
    """Each identifier of ``text`` with the first (stripped) line holding it."""
    out: dict[str, str] = {}
    for line in text.split("\n"):
        for name in identifiers(line):
            out.setdefault(name, line.strip())
    return out


class _Clock(NamedTuple):
    """How the replay times its calls: the cache's lifetime and the gaps."""

    ttl: float | None
    gaps: GapModel


def _plan(
    name: str,
    messages: list[BaseMessage],
    measure: _Measure,
    counter: TiktokenCounter,
    errors: dict[str, list[float]],
    clock: _Clock,
) -> list[_Call]:
    """Each call's provider scale, the earlier evidence its action used, needles.

    And its time, and whether the provider's cache expired before it.
    """
    seen: dict[str, str] = {}
    plan: list[_Call] = []
    upto, scale = 0, 1.0
    calls = [k for k, m in enumerate(messages) if isinstance(m, AIMessage)]
    asked = ask_plan(messages, calls)
    times = call_times(name, messages, calls, clock.gaps)
    places = result_ordinals(messages)
    cold = expired(times, clock.ttl)
    for n, k in enumerate(calls):
        reply = messages[k]
        for m in messages[upto:k]:
            if not measure(m).ids <= seen.keys():
                for name, line in _first_lines(message_text(m)).items():
                    seen.setdefault(name, line)
        upto = k
        history = messages[:k]
        plain = sum(measure(m).tokens for m in history) + REPLY_OVERHEAD
        provider = reply.response_metadata.get("prompt_tokens")
        if isinstance(provider, int) and provider > 0:
            scale = provider / plain
            for name, error in counter_errors(
                history, provider, plain, counter
            ).items():
                errors.setdefault(name, []).append(error)
        assert isinstance(reply, AIMessage)
        action = " ".join(str(c["args"].get("command", "")) for c in reply.tool_calls)
        earlier = {n: seen[n] for n in identifiers(action) if n in seen}
        needles = tuple(asked[n])
        sources = {q.source: messages[q.source].id for q in needles}
        call_ids = {q.source: _call_id(messages[q.source]) for q in needles}
        keys = {
            i: result_key(places[c]) if c in places else "" for i, c in call_ids.items()
        }
        plan.append(
            _Call(
                k, scale, earlier, needles, times[n], cold[n], sources, call_ids, keys
            )
        )
    return plan


def _replay_one(
    strategy: Strategy,
    tally: Tally,
    messages: list[BaseMessage],
    plan: list[_Call],
    measure: _Measure,
    feedback: bool,
) -> None:
    strategy.start()
    tally.summaries.append(0)
    binding = Binding() if tally.signed else None
    lived = _Lived(messages, feedback)
    budget = tally.window - tally.reserve
    previous: list[tuple[str, ...]] = []
    task = next((m for m in messages if isinstance(m, HumanMessage)), None)
    history_ids = frozenset(m.id for m in messages if m.id is not None)
    for call in plan:
        history = lived.history(call.k)
        start = time.perf_counter()
        failed = False
        try:
            prompt = strategy.prompt(history, call.at)
        except Exception:  # the agent's call fails: count it, send the history
            prompt, failed = Prompt(history), True
        tally.errors += failed
        tally.overhead_ms.append(1000 * (time.perf_counter() - start))
        summaries = _bill_summaries(prompt, previous, measure)
        sent = prompt.sent
        infos = [measure(m) for m in sent]
        tokens = [float(i.tokens) for i in infos] + [float(REPLY_OVERHEAD)]
        keys = [i.key for i in infos]
        size = call.scale * sum(tokens)
        cached = 0 if call.cold else cached_prefix(previous, keys)
        previous = keys
        tally.tokens.append(size)
        tally.summary_calls += len(prompt.summaries)
        tally.summaries[-1] += prompt.compacted
        tally.spent.append(call.scale * summaries.tokens)
        tally.spent_cached.append(call.scale * summaries.cached)
        tally.output.append(call.scale * summaries.output)
        billed = billed_input(tokens, cached) + summaries.billed
        tally.billed.append(call.scale * billed)
        tally.over_budget += failed or size > budget
        tally.expired += call.cold
        tally.bad_pairing += bool(tool_pairing_errors(sent))
        tally.task_missing += task is not None and not _has_task(task, keys, sent)
        tally.newest_missing += bool(history) and not _has_newest(history[-1], sent)
        _score(tally, call, sent, infos, history_ids)
        if binding is not None:
            kept, dropped, rejected = binding.check(call.k, sent)
            tally.signed_kept += kept
            tally.signed_dropped += dropped
            tally.signed_rejected += rejected
        lived.sent[call.k] = round(size)


class _SummaryBill(NamedTuple):
    """One call's summary calls: input tokens, those cached, billed, output."""

    tokens: float
    cached: float
    billed: float
    output: float


def _bill_summaries(
    prompt: Prompt, previous: list[tuple[str, ...]], measure: _Measure
) -> _SummaryBill:
    """Bill the summary calls made before a call, as the provider would.

    Each call's input reads the cache for its leading messages sent exactly as
    in the conversation's last prompt (``previous``) and pays full price for the
    rest; its reply is output.
    """
    tokens = cached = billed = output = 0.0
    for call in prompt.summaries:
        infos = [measure(m) for m in call.prompt]
        sizes = [float(i.tokens) for i in infos] + [float(REPLY_OVERHEAD)]
        prefix = cached_prefix(previous, [i.key for i in infos])
        tokens += sum(sizes)
        cached += sum(sizes[:prefix])
        billed += billed_input(sizes, prefix)
        output += measure.counter.text_tokens(call.reply)
    return _SummaryBill(tokens, cached, billed, output)


def _score(
    tally: Tally,
    call: _Call,
    sent: list[BaseMessage],
    infos: list[_Info],
    history_ids: frozenset[str],
) -> None:
    """Evidence (content, line, notes included) and needles of one sent prompt."""
    own = [i for m, i in zip(sent, infos, strict=True) if from_history(m, history_ids)]
    tally.evidence_seen += len(call.earlier)
    for name, line in call.earlier.items():
        tally.evidence_kept += any(name in i.ids for i in infos)
        holders = [i.text for i in own if name in i.clean_ids]
        tally.content_kept += bool(holders)
        tally.line_kept += any(line in text for text in holders)
    tally.needles_asked += len(call.needles)
    sent_ids = {m.id for m in sent}
    named = pointers(sent) if call.needles else frozenset()
    for needle in call.needles:
        found = any(needle.answer in i.text for i in own)
        tally.needles_found += found
        names = {call.call_ids[needle.source], call.keys[needle.source]} - {""}
        tally.needles_recoverable += found or bool(names & named)
        asked = tally.needles_by_distance.setdefault(needle.distance, [0, 0])
        asked[0] += 1
        asked[1] += found
        if not found:
            if call.sources[needle.source] in sent_ids:
                tally.needles_cut += 1
            else:
                tally.needles_dropped += 1


def _has_newest(newest: BaseMessage, sent: list[BaseMessage]) -> bool:
    """Whether the message a call answers is sent: itself, or a cut copy (its id)."""
    if newest.id is not None:
        return any(m.id == newest.id for m in sent)
    return any(m is newest or m == newest for m in sent)


def _has_task(
    task: BaseMessage, keys: list[tuple[str, ...]], sent: list[BaseMessage]
) -> bool:
    """Whether the task is sent: as its message, or quoted whole in another."""
    if message_key(task) in keys:
        return True
    return any(isinstance(m, HumanMessage) and task.text in m.text for m in sent)


def replay(
    transcripts: dict[str, list[BaseMessage]],
    *,
    windows: Sequence[int] = WINDOWS,
    strategies: Sequence[str] = STRATEGIES,
    reserve: int | None = None,
    guard_variants: dict[str, dict[str, Any]] | None = None,
    usage_feedback: bool = True,
    progress: bool = False,
    cache_ttl: float | None = None,
    gaps: GapModel | None = None,
    signed_thinking: bool = False,
) -> ReplayResult:
    """Replay every transcript call by call under each window and strategy.

    ``cache_ttl``: the provider's cache lifetime in seconds; a call coming later
    than that after the previous one is billed with no cached prefix, for every
    strategy. The calls are timed by the transcripts' timestamps, else by
    ``gaps`` (``_timing.GapModel``), which may also add long pauses. Each call's
    time is passed to the guards as ``prepare(now=...)``.

    ``signed_thinking``: give every assistant message a signed thinking block
    and count, per strategy, the calls that keep one, drop one, and would be
    rejected by a model that binds each block to the prompt that produced it
    (``_signed``); the guards then hold signed reasoning to its prefix.
    """
    clock = _Clock(cache_ttl, gaps or GapModel())
    counter = TiktokenCounter()
    measure = _Measure(counter)
    setups = []
    for window in windows:
        res = default_reserve(window) if reserve is None else reserve
        built = make_strategies(
            strategies,
            window,
            res,
            counter=counter,
            guard_variants=guard_variants,
            binding=signed_thinking,
        )
        setups += [
            (s, Tally(s.name, window, res, s.counter, signed=signed_thinking))
            for s in built
        ]
    errors: dict[str, list[float]] = {name: [] for name in COUNTERS}
    calls: dict[str, int] = {}
    total = sum(
        sum(isinstance(m, AIMessage) for m in msgs) for msgs in transcripts.values()
    )
    bar = Progress(total * len(setups), progress)
    with quiet_guard_log():
        for name, raw in transcripts.items():
            messages = _with_provider(raw)
            if signed_thinking:
                messages = with_signed_thinking(messages)
            plan = _plan(name, messages, measure, counter, errors, clock)
            calls[name] = len(plan)
            for strategy, tally in setups:
                _replay_one(strategy, tally, messages, plan, measure, usage_feedback)
                bar.update(len(plan))
            measure.by_id.clear()
    bar.close()
    return ReplayResult(
        [t for _, t in setups],
        errors,
        calls,
        usage_feedback,
        cache_ttl=cache_ttl,
        gaps=clock.gaps.name,
        signed_thinking=signed_thinking,
    )
