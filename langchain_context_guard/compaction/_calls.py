"""One summarizer call: its prompt, its retries, its overflow retry, its answer.

Each call is retried with a doubling delay through ``Runnable.with_retry``
(authentication, permission and bad-request errors are not retried); a failed
structured-output call falls back to plain text. A chat model gets the sectioned
prompt; a function or other runnable gets the messages to summarise (as with
LangChain's ``summarizer=``). A prompt that overflows the summarizer's window is
retried once serialised, with the middle of its conversation cut out. A model
given by name (``"openai:gpt-4.1-mini"``) is built with LangChain's
``init_chat_model``. ``_summarizer`` builds a whole summary from these calls.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableLambda,
)
from langgraph.constants import TAG_NOSTREAM

from ..engine import CompactionError, ConfigError, classify_overflow, text_of
from ._answer import (
    NotASummaryError,
    NotTextError,
    check_answer,
    retryable,
)
from ._plan import CompactionPlan
from ._request import focus
from ._summary import SummarySections
from ._summary_prompt import (
    append_prompt,
    sections_prompt,
    turn_prefix_prompt,
)

if TYPE_CHECKING:
    from ._settings import CompactionSettings

THINKING_ON = frozenset({"enabled", "adaptive"})
"""Anthropic's ``thinking.type`` values that turn thinking on."""
SUMMARIZER_TAGS = ("context_guard:summarizer", TAG_NOSTREAM)
"""Tags on every summarizer call; ``nostream`` keeps its tokens out of
``stream_mode="messages"``."""


@dataclass(frozen=True)
class SentPrefix:
    """What the agent's model call sends besides the history: system prompt, tools."""

    system: BaseMessage | None = None
    tools: tuple[Any, ...] = ()
    prepared: bool = True
    """Whether it sent the guard's prepared history (False: the state as it is)."""
    seen: bool = True
    """Whether this conversation's call was seen. False: its system prompt and
    tools are unknown (no thread id, or none of its calls yet), so the summary is
    asked with the serialised prompt instead of appended."""


class SerializedSummaryWarning(UserWarning):
    """``summary_mode="append"`` without a thread id: summaries are serialised."""


SENT_PREFIX: contextvars.ContextVar[SentPrefix | None] = contextvars.ContextVar(
    "context_guard_sent_prefix", default=None
)
"""Set by ``CompactionMiddleware`` around a compaction (``summary_mode="append"``)."""


def chat_model(model: Any) -> Any:
    """``model``, or the chat model a ``"provider:model"`` string names."""
    if not isinstance(model, str):
        return model
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:  # pragma: no cover - langchain is optional
        raise ConfigError(
            f"A model given by name ({model!r}) is built with LangChain's "
            "init_chat_model, which needs the `langchain` package.",
            field="model",
            hint='pip install "langchain-context-guard[agents]", or pass a chat '
            "model object.",
        ) from None
    try:
        return init_chat_model(model)
    except (ImportError, ValueError) as exc:
        raise ConfigError(
            f"Cannot build a chat model from {model!r}: {exc}",
            field="model",
            hint="install the provider's package (e.g. langchain-openai), set its "
            "API key, or pass a chat model object.",
        ) from exc


def forced_tools_refused(model: BaseChatModel) -> bool:
    """Whether ``model`` refuses the forced tool call of LangChain's structured output.

    Anthropic refuses ``tool_choice`` that forces a tool while thinking is on
    ("Thinking may not be enabled when tool_choice forces tool use"), which is
    how ``ChatAnthropic.with_structured_output`` asks by default. Such a model
    writes the summary's sections as text instead.
    """
    thinking = getattr(model, "thinking", None)
    return isinstance(thinking, dict) and thinking.get("type") in THINKING_ON


class SummarizerCalls:
    """One call of the user's summarizer (chat model, runnable or callable)."""

    def __init__(
        self,
        summarizer: Any,
        settings: CompactionSettings,
        count_text: Callable[[str], int] = lambda text: len(text) // 4,
    ) -> None:
        self.settings = settings
        self.count_text = count_text
        """Tokens of a text, as the guard counts them (sizes an overflow's retry)."""
        summarizer = chat_model(summarizer)
        self.model = summarizer
        self._runnable: Runnable[Any, Any] = (
            summarizer
            if isinstance(summarizer, Runnable)
            else RunnableLambda(summarizer)
        )
        self.prompted = _is_chat_model(summarizer)
        """Whether the summarizer gets our prompt (a chat model), not messages."""
        self._structured: Runnable[Any, Any] | None = None
        if (
            isinstance(summarizer, BaseChatModel)
            and settings.structured == "auto"
            and not forced_tools_refused(summarizer)
        ):
            try:
                self._structured = summarizer.with_structured_output(SummarySections)
            except (NotImplementedError, ValueError, TypeError):
                self._structured = None

    def _timeout_error(self) -> CompactionError:
        return CompactionError(
            f"The summary took longer than {self.settings.timeout} s.",
            reason="timeout",
            hint="history was left unchanged; raise `timeout` or use a faster "
            "summarizer model.",
        )

    def _input(
        self, plan: CompactionPlan, sections: bool, max_total: int | None = None
    ) -> list[BaseMessage]:
        """Our prompt for a chat model; the messages to summarise otherwise."""
        if not self.prompted:
            if not sections:
                return list(plan.turn_prefix)
            previous = [plan.previous] if plan.previous is not None else []
            return [*previous, *plan.history]
        s = self.settings
        total = max_total or s.max_prompt_chars
        if not sections:
            return turn_prefix_prompt(
                plan, max_chars=s.max_input_chars, max_total=total
            )
        if plan.appended and max_total is None:
            sent = SENT_PREFIX.get() or SentPrefix()
            asked = focus(s.instructions, plan.requested)
            return append_prompt(plan, system=sent.system, instructions=asked)
        return sections_prompt(
            plan,
            max_chars=s.max_input_chars,
            max_total=total,
            instructions=focus(s.instructions, plan.requested),
        )

    def _shorter(
        self, plan: CompactionPlan, sections: bool, error: Exception
    ) -> list[BaseMessage] | None:
        """The serialised prompt with half its conversation, after an overflow.

        Also in the ``append`` mode: the conversation as sent did not fit. When
        the summarizer's profile gives its window, the retry also stays within
        40% of it (as LangChain's ``SummarizationMiddleware`` retries).
        """
        if not self.prompted or classify_overflow(error) is None:
            return None
        prompt = self._input(plan, sections, self.settings.max_prompt_chars)
        text = text_of(prompt[-1].content)
        chars = len(text) // 2
        window = profile_window(self.model)
        if window is not None:  # 40% of the summarizer's own window, at most
            tokens = max(self.count_text(text), 1)
            chars = min(chars, len(text) * (window * 2 // 5) // tokens)
        return self._input(plan, sections, max(chars, 1))

    def _config(self, part: str, plan: CompactionPlan) -> RunnableConfig:
        metadata: dict[str, Any] = {
            "context_guard": "summarizer",
            "context_guard_part": part,
            "messages_summarized": len(plan.history),
            "messages_kept": len(plan.kept),
        }
        try:
            from langchain.agents.middleware.internal_call_transformer import (
                internal_call_metadata,
            )

            metadata.update(internal_call_metadata())
        except ImportError:  # pragma: no cover - langchain is optional
            pass
        return {
            "tags": list(SUMMARIZER_TAGS),
            "metadata": metadata,
            "run_name": "context_guard_summarizer",
        }

    def _attempts(
        self, sections: bool, stop: threading.Event | None, appended: bool = False
    ) -> tuple[Runnable[Any, Any], list[int]]:
        """The summarizer call with its retries, and a counter of attempts made.

        ``Runnable.with_retry`` retries with a doubling delay; errors a retry
        cannot fix (authentication, permission, bad request) are not retried. A
        structured-output call is tried once, then plain text with the retries.
        """
        s = self.settings
        made = [0]

        def start(prompt: list[BaseMessage]) -> list[BaseMessage]:
            if stop is not None and stop.is_set():
                raise self._timeout_error()
            made[0] += 1
            return prompt

        def check(out: Any) -> Any:
            return check_answer(
                out, sections, strict=appended, text_only=not self.prompted
            )

        def attempt(runnable: Runnable[Any, Any], tries: int) -> Runnable[Any, Any]:
            chain = RunnableLambda(start) | runnable | RunnableLambda(check)
            if tries <= 1:
                return chain
            return chain.with_retry(
                retry_if_exception_type=retryable,
                stop_after_attempt=tries,
                wait_exponential_jitter=s.retry_delay > 0,
                exponential_jitter_params={
                    "initial": s.retry_delay,
                    "exp_base": 2,
                    "jitter": 0,
                    "max": max(s.retry_delay, 60.0),
                },
            )

        if sections and appended:
            # Plain text, with the agent's tools: the request as the agent sends it.
            tools = (SENT_PREFIX.get() or SentPrefix()).tools
            runnable = self._runnable
            if tools and isinstance(self.model, BaseChatModel):
                try:
                    runnable = self.model.bind_tools(list(tools))
                except NotImplementedError:  # a model that takes no tools
                    runnable = self._runnable
            return attempt(runnable, s.retries + 1), made
        if sections and self._structured is not None:
            first = attempt(self._structured, 1)
            if s.retries == 0:
                return first, made
            rest = attempt(self._runnable, s.retries)
            return first.with_fallbacks([rest]), made
        return attempt(self._runnable, s.retries + 1), made

    def _ask(
        self,
        plan: CompactionPlan,
        sections: bool,
        stop: threading.Event,
        *,
        part: str | None = None,
        prompt: list[BaseMessage] | None = None,
    ) -> Any:
        """One answer; ``prompt`` (a merge) instead of the plan's own prompt."""
        runnable, made = self._attempts(sections, stop, plan.appended)
        config = self._config(self._part(sections, part, prompt), plan)
        try:
            try:
                return runnable.invoke(prompt or self._input(plan, sections), config)
            except (CompactionError, NotTextError):
                raise
            except Exception as exc:
                shorter = None if prompt else self._shorter(plan, sections, exc)
                if shorter is None:
                    raise
                return runnable.invoke(shorter, config)
        except (CompactionError, NotTextError):
            raise
        except Exception as exc:
            raise self._failed(exc, made[0]) from None

    async def _aask(
        self,
        plan: CompactionPlan,
        sections: bool,
        *,
        part: str | None = None,
        prompt: list[BaseMessage] | None = None,
    ) -> Any:
        """Async ``_ask``."""
        runnable, made = self._attempts(sections, None, plan.appended)
        config = self._config(self._part(sections, part, prompt), plan)
        try:
            try:
                request = prompt or self._input(plan, sections)
                return await runnable.ainvoke(request, config)
            except (CompactionError, NotTextError):
                raise
            except Exception as exc:
                shorter = None if prompt else self._shorter(plan, sections, exc)
                if shorter is None:
                    raise
                return await runnable.ainvoke(shorter, config)
        except (CompactionError, NotTextError):
            raise
        except Exception as exc:
            raise self._failed(exc, made[0]) from None

    @staticmethod
    def _part(sections: bool, part: str | None, prompt: Any) -> str:
        """The call's ``context_guard_part`` metadata."""
        if prompt is not None:
            return "merge"
        return part or ("sections" if sections else "turn_prefix")

    def _failed(self, error: Exception, attempts: int) -> CompactionError:
        if isinstance(error, NotASummaryError):
            return CompactionError(
                f"The summarizer's answer is not a summary: {error}.",
                reason="not_a_summary",
                hint="history was left unchanged; a summarizer model that follows "
                "the instruction (or summary_mode='serialize') avoids this.",
            )
        why = "" if retryable(error) else " (not retried: a retry cannot fix it)"
        err = CompactionError(
            f"The summarizer failed {attempts} time(s){why}; last error: {error!r}.",
            reason="summarizer_error",
        )
        err.__cause__ = error
        return err


def profile_window(model: Any) -> int | None:
    """``max_input_tokens`` of a chat model's profile (bound or not), if known."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    profile = getattr(model, "profile", None)
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return window if isinstance(window, int) and window > 0 else None


def _is_chat_model(summarizer: Any) -> bool:
    """A chat model, bound or configured (``model.with_config(...)``) or not."""
    while isinstance(summarizer, RunnableBinding):
        summarizer = summarizer.bound
    return isinstance(summarizer, BaseChatModel)
