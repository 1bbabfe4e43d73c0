"""What a summarizer's answer is worth: a summary, a failure to retry, or neither.

``check_answer`` turns a reply into sections (or the split turn's text) and refuses
one that is not a summary; ``retryable`` says whether asking again may help;
``assemble`` puts the answer together with what the plan already knows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.exceptions import ModelError
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from ..engine import ContextGuardError, classify_overflow, text_of
from ._plan import CompactionPlan
from ._summary import Summary, SummarySections, has_sections, parse_sections

_NOT_RETRYABLE_STATUS = frozenset({400, 401, 403, 404, 422})
_NOT_RETRYABLE_NAMES = frozenset(
    {
        "AuthenticationError",
        "PermissionDeniedError",
        "BadRequestError",
        "NotFoundError",
        "UnprocessableEntityError",
    }
)


def retryable(error: BaseException) -> bool:
    """Whether calling the summarizer again may succeed.

    LangChain's ``ModelError`` says so itself (``is_retryable``); otherwise an
    authentication, permission or bad-request error (by HTTP status or SDK class
    name) is final, as are the library's own errors and a context overflow.
    Anything else is retried.
    """
    if not isinstance(error, Exception) or isinstance(error, ContextGuardError):
        return False
    if isinstance(error, NotTextError):
        return False
    if isinstance(error, NotASummaryError):
        return False  # the same request asks for the same kind of answer
    if classify_overflow(error) is not None:
        return False  # the same prompt overflows again; ``_shorter`` cuts it
    if isinstance(error, ModelError):
        return bool(error.is_retryable)
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and status in _NOT_RETRYABLE_STATUS:
        return False
    return not any(c.__name__ in _NOT_RETRYABLE_NAMES for c in type(error).__mro__)


def assemble(
    plan: CompactionPlan, sections: SummarySections | None, turn: str | None
) -> Summary:
    summary = replace(
        plan.previous_summary or Summary(),
        original_request=plan.original_request,
        touched=plan.touched,
        turn_context="",
    )
    if sections is not None:
        summary = summary.with_sections(sections)
    if turn:
        request = f"Request of this turn (verbatim):\n{plan.turn_request}\n\n"
        summary = replace(summary, turn_context=request + turn)
    return summary


class NotASummaryError(ValueError):
    """The summarizer answered, but not with a summary (a tool call, loose text)."""


class NotTextError(TypeError):
    """A summarizer function or runnable returned neither text nor a message.

    A bug in the caller's code, not a failed summary: raised as it is, as
    LangChain's ``SummarizationMiddleware`` raises it, never retried.
    """


def check_answer(
    out: Any, sections: bool, *, strict: bool = False, text_only: bool = False
) -> Any:
    """Normalise a summarizer answer; raise on an empty or unusable one.

    A reply that calls a tool is never a summary, whatever text comes with it;
    ``strict`` (an appended request, which the agent's own model may answer as a
    turn of the task) also refuses text without the summary's sections.
    ``text_only`` (a function or runnable, not a chat model with structured
    output): anything but text or a message raises ``NotTextError``.
    """
    if text_only and not isinstance(out, str | BaseMessage):
        raise NotTextError(
            f"The summarizer must return a str (or a message), got "
            f"{type(out).__name__}."
        )
    if isinstance(out, BaseMessage) and getattr(out, "tool_calls", None):
        names = ", ".join(c["name"] for c in getattr(out, "tool_calls", []))
        raise NotASummaryError(f"it calls a tool ({names}) instead of summarising")
    if isinstance(out, SummarySections):
        parsed: Any = out
    elif isinstance(out, BaseModel | dict) and not isinstance(out, BaseMessage):
        if not sections:
            raise TypeError(f"summarizer returned {type(out).__name__}, not text")
        data = out.model_dump() if isinstance(out, BaseModel) else out
        parsed = SummarySections.model_validate(data)
    else:
        text = text_of(out.content) if isinstance(out, BaseMessage) else out
        if not isinstance(text, str):
            raise TypeError(f"summarizer returned {type(out).__name__}, not text")
        if sections and strict and not has_sections(text):
            raise NotASummaryError(
                f"it has none of the summary's sections ({len(text):,} characters "
                "of text)"
            )
        parsed = parse_sections(text) if sections else text.strip()
    if not parsed or (sections and not any(parsed.model_dump().values())):
        raise ValueError("the summarizer returned an empty summary")
    return parsed
