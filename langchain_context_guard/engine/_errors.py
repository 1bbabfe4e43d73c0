"""The library's error tree.

::

    ContextGuardError
    ├── ConfigError            a GuardPolicy value or config file is invalid
    ├── InvalidInputError      messages that cannot be read as a chat history
    ├── WindowTooSmallError    the model's window is below the hard minimum
    ├── BudgetExceededError    the kept messages cannot fit the budget
    ├── CompactionError        a summary failed, timed out or did not shrink history
    └── ContextOverflowError   the provider still overflowed after every recovery step
                               (and LangChain's ContextOverflowError)

Every error carries its figures as attributes and a one-line ``hint`` that says
what to do about it; ``str(error)`` ends with that hint.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from langchain_core.exceptions import (
    ContextOverflowError as LangChainContextOverflowError,
)


class ContextGuardError(Exception):
    """Base of every error raised by langchain-context-guard."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.hint = hint or self.hint
        super().__init__(f"{message} Fix: {self.hint}" if self.hint else message)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled as made, not re-made: the constructors take figures, not the text.

        An error crossing a process boundary (a worker pool, a task queue) would
        otherwise be rebuilt from its finished message: a second ``Fix:``, or a
        ``TypeError`` for the constructors that take figures.
        """
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(
    cls: type[ContextGuardError], args: tuple[object, ...], state: dict[str, object]
) -> ContextGuardError:
    """An unpickled error: its message and attributes as they were."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigError(ContextGuardError, ValueError):
    """A configuration value is invalid."""

    def __init__(
        self, message: str, *, field: str | None = None, hint: str = ""
    ) -> None:
        self.field = field
        super().__init__(message, hint=hint or "correct the named setting.")


def unknown_setting(
    owner: str, name: str, known: Iterable[str], page: str = "docs/configuration.md"
) -> ConfigError:
    """The error for a setting ``owner`` does not have: the nearest name as the fix.

    The valid names are not listed (there are dozens); difflib's closest one is
    the likely fix, and the reference ``page`` has the rest.
    """
    close = difflib.get_close_matches(name, list(known), n=1)
    return ConfigError(
        f"{owner}: unknown setting {name!r}.",
        field=name,
        hint=f"did you mean {close[0]!r}?"
        if close
        else f"remove it; {owner}'s settings are listed in {page}.",
    )


class InvalidInputError(ContextGuardError, ValueError):
    """The messages given cannot be read as a chat history."""

    def __init__(
        self, message: str, *, index: int | None = None, hint: str = ""
    ) -> None:
        self.index = index
        super().__init__(
            message,
            hint=hint
            or "pass BaseMessage objects, OpenAI-style dicts with role/content, "
            "or (role, content) tuples.",
        )


class WindowTooSmallError(ContextGuardError):
    """The model's context window is below the hard minimum."""

    def __init__(self, window: int, minimum: int, source: str) -> None:
        self.window = window
        self.minimum = minimum
        self.source = source
        if source == "override":  # the user's own setting: say so, once
            origin = "set by GuardPolicy.context_window"
            hint = "lower GuardPolicy.hard_min_tokens to allow a window this small"
        else:
            origin = f"from {source}"
            hint = (
                "set GuardPolicy.context_window if that window is wrong; if it is "
                "right, lower GuardPolicy.hard_min_tokens"
            )
        super().__init__(
            f"Context window of {window:,} tokens ({origin}) is below the "
            f"minimum of {minimum:,} tokens.",
            hint=f"{hint}, and keep reserve_tokens well under the window.",
        )


class BudgetExceededError(ContextGuardError):
    """The messages that must be kept do not fit the token budget."""

    def __init__(
        self,
        tokens: int,
        budget: int,
        window: int,
        what: str,
        tool: str | None = None,
        *,
        pinned: int = 0,
        pinned_tokens: int = 0,
    ) -> None:
        self.tokens = tokens
        self.budget = budget
        self.window = window
        self.over_by = tokens - budget
        self.tool = tool
        """An excluded tool whose whole result is among what must be kept."""
        self.pinned = pinned
        """How many pinned messages are among what must be kept."""
        self.pinned_tokens = pinned_tokens
        hint = (
            "shorten the system prompt or latest message, lower reserve_tokens, "
            "or use a model with a larger window."
        )
        if pinned:
            what = (
                f"{what}, with {pinned} pinned message(s) of {pinned_tokens:,} "
                "tokens (never cut: pinned),"
            )
            hint = (
                "release pins: unpin(message), pin_update(messages, ids, "
                "release=True), or the model's unpin_message tool; or use a model "
                "with a larger window."
            )
        elif tool is not None:
            what = f"{what}, with a whole result of {tool!r} (never cut: excluded),"
            hint = (
                f"let the results of {tool!r} be cut: take it out of exclude_tools (a "
                "ToolPolicy(max_result_chars=...) caps it instead), or use a model "
                "with a larger window."
            )
        super().__init__(
            f"{what} need {tokens:,} tokens but the budget is {budget:,} "
            f"(window {window:,}); over by {self.over_by:,}.",
            hint=hint,
        )


class CompactionError(ContextGuardError):
    """A compaction summary failed, timed out, or did not shrink the history."""

    def __init__(self, message: str, *, reason: str, hint: str = "") -> None:
        self.reason = reason
        super().__init__(
            message,
            hint=hint or "history was left unchanged; check the summarizer model.",
        )


class ContextOverflowError(ContextGuardError, LangChainContextOverflowError):
    """The provider rejected the context even after every recovery step.

    Also a ``langchain_core.exceptions.ContextOverflowError``, so code that
    catches LangChain's overflow error (as langchain-openai and
    langchain-anthropic raise it) catches this one too.
    """

    def __init__(
        self,
        message: str,
        *,
        tokens: int | None = None,
        limit: int | None = None,
        attempts: int = 0,
    ) -> None:
        self.tokens = tokens
        self.limit = limit
        self.attempts = attempts
        super().__init__(
            message,
            hint="reset the conversation (start a new thread) or pick a model with "
            "a larger context window.",
        )
