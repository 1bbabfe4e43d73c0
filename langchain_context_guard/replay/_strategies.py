"""The context strategies the replay compares, each preparing one call's prompt.

No guard, LangChain's ``trim_messages``, a "sticky cut" baseline,
``SummarizationMiddleware`` and ``ContextEditingMiddleware``, and ours:
``ContextGuard`` (also without the stable prefix, ``guard_no_stable``) alone or
with the ``Compactor``. Summaries come from ``ScriptedSummarizer``, a deterministic
offline model, so a replay needs no network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from ..engine import (
    REPLY_OVERHEAD,
    ContextGuard,
    ContextGuardError,
    GuardPolicy,
    TiktokenCounter,
    text_of,
)
from ._metrics import TOKEN, identifiers

STRATEGIES = (
    "none",
    "trim_messages",
    "sticky_cut",
    "summarization",
    "context_editing",
    "guard_no_stable",
    "guard",
    "guard+compaction",
)
"""Strategy names, in table order."""
PROVIDER = "google_genai"
"""``model_provider`` put on replayed replies, as LangChain's Gemini chat model does."""


class ScriptedSummarizer(BaseChatModel):
    """A deterministic, offline stand-in for the summary model.

    Answers the summary prompt with the identifiers (paths, code names, numbers)
    of the messages it was shown, newest first, up to ``max_chars`` characters:
    roughly the ARTIFACTS section a good LLM summary writes.
    """

    max_chars: int = 2_000
    prompts: list[str] = Field(default_factory=list)
    """Every prompt received (the summary calls' input)."""
    replies: list[str] = Field(default_factory=list)
    """Every reply written (the summary calls' output)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": PROVIDER, "ls_model_type": "chat"}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append("\n".join(text_of(m.content) for m in messages))
        body = text_of(messages[-1].content).rsplit("Messages to summarize:", 1)[-1]
        names = list(dict.fromkeys(reversed(TOKEN.findall(body))))
        found = identifiers(body)
        lines, size = ["## ARTIFACTS"], 12
        for raw in names:
            name = raw.strip("./-")
            if name in found and size + len(name) + 1 <= self.max_chars:
                lines.append(name)
                size += len(name) + 1
        reply = AIMessage("\n".join(lines))
        self.replies.append(reply.text)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def take_spent(self, tokens: Callable[[str], int]) -> tuple[int, int]:
        """Input and output tokens of the calls since the last take; forgets them."""
        spent = sum(map(tokens, self.prompts)), sum(map(tokens, self.replies))
        del self.prompts[:], self.replies[:]
        return spent


Prompt = tuple[list[BaseMessage], int, int]
"""What a strategy sends for one call, and the input and output tokens its own
model calls spent on the way (summaries; tiktoken)."""


class Strategy:
    """One way of preparing each call's prompt; ``start`` before each transcript."""

    name = "none"
    counter = ""
    """The counter this strategy decides with (a key of ``COUNTERS``)."""

    def start(self) -> None:
        """Forget the previous transcript."""

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """The messages sent for a call on ``history``, made at ``now`` (seconds)."""
        return history, 0, 0


class TrimMessages(Strategy):
    """``trim_messages`` as LangGraph's docs use it in a pre-model hook."""

    name, counter = "trim_messages", "approximate"

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Keep the last ``budget`` tokens, starting on a human message."""
        sent = trim_messages(
            history,
            strategy="last",
            token_counter=count_tokens_approximately,
            max_tokens=self.budget,
            start_on="human",
            end_on=("human", "tool"),
            include_system=True,
            allow_partial=False,
        )
        return sent, 0, 0


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
        return [*head, *history[start:]], 0, 0


class Summarization(Strategy):
    """LangChain's ``SummarizationMiddleware``, its state kept between calls."""

    name, counter = "summarization", "approximate+usage"

    def __init__(self, window: int, budget: int, counter: TiktokenCounter) -> None:
        from langchain.agents.middleware import SummarizationMiddleware

        self.model = ScriptedSummarizer(profile={"max_input_tokens": window})
        self.middleware = SummarizationMiddleware(
            self.model,
            trigger=("tokens", int(0.8 * budget)),
            keep=("tokens", int(0.3 * budget)),
        )
        self._text_tokens = counter.text_tokens
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
        return [*system, *self.state], *self.model.take_spent(self._text_tokens)


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
        return [*system, *sent], 0, 0


class Guard(Strategy):
    """Ours: ``ContextGuard.prepare`` on the full history of every call."""

    name, counter = "guard", "tiktoken+usage"

    def __init__(self, policy: GuardPolicy, name: str = "guard") -> None:
        self.guard = ContextGuard(policy)
        self.name = name
        self.counter = "tiktoken+usage" if policy.usage_anchoring else "tiktoken"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Send what the guard prepares."""
        return self.guard.prepare(history, now=now).messages, 0, 0


class GuardCompaction(Strategy):
    """Ours with compaction, as the LangGraph branch runs it.

    ``Compactor`` rewrites the persisted state when it triggers, then ``prepare``
    runs on every call.
    """

    name, counter = "guard+compaction", "tiktoken+usage"

    def __init__(
        self,
        policy: GuardPolicy,
        counter: TiktokenCounter,
        name: str = "guard+compaction",
    ) -> None:
        from ..compaction import Compactor

        self.name = name
        self.model = ScriptedSummarizer()
        self.compactor = Compactor(self.model, guard=ContextGuard(policy))
        self._text_tokens = counter.text_tokens
        self.start()

    def start(self) -> None:
        """Empty the graph state."""
        self.state: list[BaseMessage] = []
        self.seen = 0

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        """Append the new messages, compact if due, and prepare the state."""
        self.state = [*self.state, *history[self.seen :]]
        self.seen = len(history)
        if self.compactor.should_compact(self.state):
            with contextlib.suppress(ContextGuardError):
                self.state = self.compactor.compact(self.state).messages
        spent = self.model.take_spent(self._text_tokens)
        return self.compactor.guard.prepare(self.state, now=now).messages, *spent


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
) -> list[Strategy]:
    """Build the named strategies for one window (budget = window - reserve).

    ``guard_variants`` maps extra names to ``GuardPolicy`` settings, so several
    policies of ours can be compared in one run (``"guard"`` uses the defaults).
    """
    budget = window - reserve
    variants = {
        "guard": {},
        "guard_no_stable": {"stable_prefix": False},
        **(guard_variants or {}),
    }
    build: dict[str, Callable[[], Strategy]] = {
        "none": Strategy,
        "trim_messages": lambda: TrimMessages(budget),
        "sticky_cut": lambda: StickyCut(budget, counter),
        "summarization": lambda: Summarization(window, budget, counter),
        "context_editing": lambda: ContextEditing(window),
        "guard+compaction": lambda: GuardCompaction(
            GuardPolicy(context_window=window, reserve_tokens=reserve), counter
        ),
    }
    out: list[Strategy] = []
    for name in names:
        if name in variants:
            options = {"context_window": window, "reserve_tokens": reserve}
            options.update(variants[name])
            compaction = bool(options.pop("compaction", False))
            policy = GuardPolicy(**options)
            out.append(
                GuardCompaction(policy, counter, name)
                if compaction
                else Guard(policy, name)
            )
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
        missing.add("guard+compaction")
    return tuple(s for s in STRATEGIES if s not in missing)


def default_reserve(window: int) -> int:
    """Reply reserve used when none is given: ``GuardPolicy``'s rule for the window."""
    return GuardPolicy().reserve(window)
