"""The context strategies the replay compares, each preparing one call's prompt.

No guard, LangChain's ``trim_messages``, a "sticky cut" baseline (and the same
cut never sending a call without the message it answers),
``SummarizationMiddleware`` and ``ContextEditingMiddleware``, and ours:
``ContextGuard`` (also without the stable prefix, ``guard_no_stable``) alone or
with the ``Compactor`` (its summary prompt serialised, ``guard+compaction``, or
appended to the conversation as sent, ``guard+compaction_append``), and a guard
variant in persist mode (``GuardPersist``: the prompt becomes the stored
history). Summaries come
from ``ScriptedSummarizer`` (``_summarizer``), a deterministic offline model, so a
replay needs no network; each strategy hands its summary calls to the loop, which
bills them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from ..engine import (
    REPLY_OVERHEAD,
    ContextGuard,
    ContextGuardError,
    GuardPolicy,
    TiktokenCounter,
)
from ._summarizer import ScriptedSummarizer, SummaryCall

STRATEGIES = (
    "none",
    "trim_messages",
    "trim_messages_any",
    "sticky_cut",
    "sticky_cut_newest",
    "summarization",
    "context_editing",
    "guard_no_stable",
    "guard",
    "guard+compaction",
    "guard+compaction_append",
)
"""Strategy names, in table order."""


class Prompt(NamedTuple):
    """What a strategy sends for one call, and its own model calls on the way."""

    sent: list[BaseMessage]
    summaries: tuple[SummaryCall, ...] = ()
    """The summary calls made before it (billed by the replay)."""
    compacted: bool = False
    """Whether a summary replaced part of the history before it."""


class Strategy:
    """One way of preparing each call's prompt; ``start`` before each transcript."""

    name = "none"
    counter = ""
    """The counter this strategy decides with (a key of ``COUNTERS``)."""

    def start(self) -> None:
        """Forget the previous transcript."""

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """The messages sent for a call on ``history``, made at ``now`` (seconds)."""
        return Prompt(history)


class TrimMessages(Strategy):
    """``trim_messages`` as LangGraph's docs use it in a pre-model hook."""

    name, counter = "trim_messages", "approximate"
    start_on: str | None = "human"

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Keep the last ``budget`` tokens, starting on ``start_on`` if set."""
        sent = trim_messages(
            history,
            strategy="last",
            token_counter=count_tokens_approximately,
            max_tokens=self.budget,
            start_on=self.start_on,
            end_on=("human", "tool"),
            include_system=True,
            allow_partial=False,
        )
        return Prompt(sent)


class TrimMessagesAny(TrimMessages):
    """``trim_messages`` without ``start_on``: the cut may start on any message."""

    name = "trim_messages_any"
    start_on = None


class StickyCut(Strategy):
    """A 20-line baseline: one cut point, moved only when the history overflows.

    Keeps the system message and the first user message, and everything from the
    cut on. While that fits the budget the cut stays (the prompt grows by
    appending, so the provider cache keeps hitting); when it no longer fits, the
    cut moves forward to the first turn boundary (a message that is not a tool
    result) at which the kept part is at most ``share`` of the budget. Sizes are
    tiktoken counts scaled by the last reply's usage over what was sent for it.
    """

    name, counter = "sticky_cut", "tiktoken+usage"

    def __init__(self, budget: int, counter: TiktokenCounter, share: float = 0.5):
        self.budget, self.share = budget, share
        self._count = counter.count_message
        self.start()

    def start(self) -> None:
        """Forget the cut."""
        self.cut, self.ratio, self.last = 0, 1.0, 0

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """The head plus ``history[cut:]``, the cut moved forward if over budget."""
        head = [m for m in history[:2] if not isinstance(m, (AIMessage, ToolMessage))]
        usage = next(
            (m.usage_metadata for m in reversed(history) if isinstance(m, AIMessage)),
            None,
        )
        if usage and usage.get("input_tokens") and self.last:
            ratio = usage["input_tokens"] / self.last
            if 0.5 <= ratio <= 2:  # else the usage is not of what was sent
                self.ratio = ratio
        start = max(self.cut, len(head))
        sizes = [self._count(m) for m in history]
        fixed = sum(sizes[: len(head)]) + REPLY_OVERHEAD
        if self.ratio * (fixed + sum(sizes[start:])) > self.budget:
            room = self.share * self.budget / self.ratio - fixed
            kept = sum(sizes[start:])
            while start < len(history) and (
                kept > room or isinstance(history[start], ToolMessage)
            ):
                kept -= sizes[start]
                start += 1
        self.cut = start
        self.last = fixed + sum(sizes[start:])
        return Prompt([*head, *history[start:]])


class StickyCutNewest(StickyCut):
    """The sticky cut that always sends the message a call answers.

    Where the newest turn alone (the last assistant message and what follows it)
    does not fit the share a cut keeps, the sticky cut moves past it and sends the
    system prompt and the task alone, so the model never sees the result it asked
    for. This one sends that turn instead, each message after the assistant's cut
    to its head and tail so that together they fit the budget: the least a cut
    must do for the call to be answerable.
    """

    name = "sticky_cut_newest"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """As the sticky cut's, but never without the newest turn."""
        prompt = super().prompt(history, now)
        if not history or self.cut < len(history):
            return prompt
        head = prompt.sent
        first = max(
            (i for i, m in enumerate(history) if isinstance(m, AIMessage)),
            default=len(head),
        )
        turn = history[max(first, len(head)) :]
        if not turn:
            return prompt
        fixed = sum(map(self._count, head)) + REPLY_OVERHEAD + self._count(turn[0])
        room = (self.budget / self.ratio - fixed) / max(len(turn) - 1, 1)
        kept = [turn[0], *(self._fit(m, room) for m in turn[1:])]
        self.cut = len(history) - len(turn)
        self.last = fixed + sum(map(self._count, kept[1:]))
        return Prompt([*head, *kept])

    def _fit(self, message: BaseMessage, room: float) -> BaseMessage:
        """``message`` with its text cut to its head and tail until within ``room``."""
        text, keep = message.text, 1.0
        while self._count(message) > room and keep * len(text) > 200:
            keep *= 0.8
            half = int(keep * len(text) / 2)
            cut = f"{text[:half]}\n[... cut ...]\n{text[-half:]}"
            message = message.model_copy(update={"content": cut})
        return message


class Summarization(Strategy):
    """LangChain's ``SummarizationMiddleware``, its state kept between calls."""

    name, counter = "summarization", "approximate+usage"

    def __init__(self, window: int, budget: int) -> None:
        from langchain.agents.middleware import SummarizationMiddleware

        self.model = ScriptedSummarizer(profile={"max_input_tokens": window})
        self.middleware = SummarizationMiddleware(
            self.model,
            trigger=("tokens", int(0.8 * budget)),
            keep=("tokens", int(0.3 * budget)),
        )
        self.start()

    def start(self) -> None:
        """Empty the agent state."""
        self.state: list[Any] = []
        self.seen = 0

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Append the new messages to the state, run ``before_model``, send state."""
        from langgraph.graph.message import add_messages

        system, rest = _split_system(history)
        new: list[Any] = rest[self.seen :]
        self.state = cast(list[Any], add_messages(self.state, new))
        self.seen = len(rest)
        update = self.middleware.before_model(
            cast(Any, {"messages": self.state}), cast(Any, None)
        )
        if update:
            self.state = cast(list[Any], add_messages(self.state, update["messages"]))
        return Prompt([*system, *self.state], self.model.take_calls())


class ContextEditing(Strategy):
    """``ContextEditingMiddleware(ClearToolUsesEdit)`` driven on each request."""

    name, counter = "context_editing", "approximate"

    def __init__(self, window: int) -> None:
        from langchain.agents.middleware import (
            ClearToolUsesEdit,
            ContextEditingMiddleware,
        )

        self.model = ScriptedSummarizer(profile={"max_input_tokens": window})  # unused
        # Anthropic's default clears at 100k of a 200k window: half the window.
        edit = ClearToolUsesEdit(trigger=window // 2, keep=3)
        self.middleware: Any = ContextEditingMiddleware(edits=[edit])

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Run ``wrap_model_call`` and capture the request it hands the model."""
        from langchain.agents.middleware.types import ModelRequest, ModelResponse

        system, rest = _split_system(history)
        sent: list[BaseMessage] = []

        def handler(request: Any) -> Any:
            sent.extend(request.messages)
            return ModelResponse(result=[AIMessage("")])

        request = ModelRequest(
            model=self.model,
            messages=cast(list[Any], rest),
            system_message=cast(SystemMessage, system[0]) if system else None,
            state=cast(Any, {"messages": rest}),
        )
        self.middleware.wrap_model_call(request, handler)
        return Prompt([*system, *sent])


class Guard(Strategy):
    """Ours: ``ContextGuard.prepare`` on the full history of every call."""

    name, counter = "guard", "tiktoken+usage"

    def __init__(self, policy: GuardPolicy, name: str = "guard") -> None:
        self.guard = ContextGuard(policy)
        self.name = name
        self.counter = "tiktoken+usage" if policy.usage_anchoring else "tiktoken"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Send what the guard prepares."""
        return Prompt(self.guard.prepare(history, now=now).messages)


class GuardPersist(Guard):
    """Ours in persist mode, as ``pre_model_hook(mode="persist")`` runs it.

    The prompt is written back as the stored history: each call prepares the
    previous prompt and the messages new since (``prepare(persist=True)``).
    """

    def __init__(self, policy: GuardPolicy, name: str) -> None:
        super().__init__(policy, name)
        self.start()

    def start(self) -> None:
        """Empty the stored history."""
        self.state: list[BaseMessage] = []
        self.seen = 0

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Prepare the stored history and the new messages; store the prompt."""
        given = [*self.state, *history[self.seen :]]
        self.state = self.guard.prepare(given, now=now, persist=True).messages
        self.seen = len(history)
        return Prompt(self.state)


class GuardCompaction(Strategy):
    """Ours with compaction, as the LangGraph branch runs it.

    ``Compactor`` rewrites the persisted state when it triggers, then ``prepare``
    runs on every call. ``summary_mode`` and ``settings`` (any other field) are
    ``CompactionSettings``'s.
    """

    name, counter = "guard+compaction", "tiktoken+usage"

    def __init__(
        self,
        policy: GuardPolicy,
        name: str = "guard+compaction",
        summary_mode: Literal["serialize", "append"] = "serialize",
        settings: dict[str, Any] | None = None,
    ) -> None:
        from ..compaction import CompactionSettings, Compactor

        self.name = name
        self.model = ScriptedSummarizer()
        config = CompactionSettings(summary_mode=summary_mode, **(settings or {}))
        self.compactor = Compactor(self.model, config, guard=ContextGuard(policy))
        self.start()

    def start(self) -> None:
        """Empty the graph state."""
        self.state: list[BaseMessage] = []
        self.seen = 0

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Append the new messages, compact if due, and prepare the state."""
        self.state = [*self.state, *history[self.seen :]]
        self.seen = len(history)
        compacted = False
        if self.compactor.should_compact(self.state):
            with contextlib.suppress(ContextGuardError):
                self.state = self.compactor.compact(self.state).messages
                compacted = True
        sent = self.compactor.guard.prepare(self.state, now=now).messages
        return Prompt(sent, self.model.take_calls(), compacted)


def _split_system(
    history: list[BaseMessage],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    if history and isinstance(history[0], SystemMessage):
        return history[:1], history[1:]
    return [], history


def make_strategies(
    names: Sequence[str],
    window: int,
    reserve: int,
    *,
    counter: TiktokenCounter,
    guard_variants: dict[str, dict[str, Any]] | None = None,
    binding: bool = False,
) -> list[Strategy]:
    """Build the named strategies for one window (budget = window - reserve).

    ``guard_variants`` maps extra names to ``GuardPolicy`` settings, so several
    policies of ours can be compared in one run (``"guard"`` uses the defaults);
    ``"compaction": True`` adds the ``Compactor``, with ``"summary_mode"`` and
    ``"compaction_settings"`` (other ``CompactionSettings`` fields);
    ``"persist": True`` runs the guard in persist mode (``GuardPersist``),
    ``"archive": True`` with its policy ``with_archive()``, as an adapter with a
    ``ResultArchive`` runs it.
    ``binding``: the replayed model binds signed reasoning to its prefix, so the
    guards hold it there (``bound_thinking``) unless a variant says otherwise.
    """
    budget = window - reserve
    variants: dict[str, dict[str, Any]] = {
        "guard": {},
        "guard_no_stable": {"stable_prefix": False},
        "guard+compaction": {"compaction": True, "summary_mode": "serialize"},
        "guard+compaction_append": {"compaction": True, "summary_mode": "append"},
        **(guard_variants or {}),
    }
    build: dict[str, Callable[[], Strategy]] = {
        "none": Strategy,
        "trim_messages": lambda: TrimMessages(budget),
        "trim_messages_any": lambda: TrimMessagesAny(budget),
        "sticky_cut": lambda: StickyCut(budget, counter),
        "sticky_cut_newest": lambda: StickyCutNewest(budget, counter),
        "summarization": lambda: Summarization(window, budget),
        "context_editing": lambda: ContextEditing(window),
    }
    out: list[Strategy] = []
    for name in names:
        if name in variants:
            options: dict[str, Any] = {
                "context_window": window,
                "reserve_tokens": reserve,
                **({"bound_thinking": True} if binding else {}),
                **variants[name],
            }
            compaction = bool(options.pop("compaction", False))
            persist = bool(options.pop("persist", False))
            mode = options.pop("summary_mode", "serialize")
            more = options.pop("compaction_settings", None)
            archive = bool(options.pop("archive", False))
            policy = GuardPolicy(**options)
            if archive:
                policy = policy.with_archive()
            if compaction:
                out.append(GuardCompaction(policy, name, mode, more))
            elif persist:
                out.append(GuardPersist(policy, name))
            else:
                out.append(Guard(policy, name))
        elif name in build:
            out.append(build[name]())
        else:
            known = ", ".join([*build, *variants])
            raise ValueError(f"unknown strategy {name!r}; expected one of {known}")
    return out


def available_strategies() -> tuple[str, ...]:
    """``STRATEGIES`` less those whose packages are not installed."""
    import importlib.util

    missing: set[str] = set()
    if importlib.util.find_spec("langchain") is None:
        missing |= {"summarization", "context_editing"}
    try:
        from .. import compaction  # noqa: F401
    except ImportError:
        missing |= {"guard+compaction", "guard+compaction_append"}
    return tuple(s for s in STRATEGIES if s not in missing)


def default_reserve(window: int) -> int:
    """Reply reserve used when none is given: ``GuardPolicy``'s rule for the window."""
    return GuardPolicy().reserve(window)
