"""What a ``create_agent`` model request sends, counted the same on every path.

``RequestInputs`` gives the messages (system first) and the tools a request binds
(``request.tools`` plus the structured-output tools of ``response_format``);
``build_guard`` makes a ``ContextGuard`` from what a middleware was given;
``warn_silent_overflow`` warns when a reply reports more input than the window;
``stamp_reply`` keeps the handover record and usage in the reply's metadata.
Used by ``ContextGuardMiddleware``, the compaction fallback and overflow recovery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.structured_output import (
    AutoStrategy,
    OutputToolBinding,
    ProviderStrategy,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage

from ..engine import (
    STATE_KEY,
    ConfigError,
    ContextGuard,
    GuardPolicy,
    same_list,
    silent_overflow,
    unknown_setting,
)
from ._callbacks import Usage, logger
from ._silent import note_silent_overflow

if TYPE_CHECKING:
    from ..engine import GuardReport

Result = ModelResponse[Any] | AIMessage
USAGE_KEY = "context_guard_usage"
"""``response_metadata`` key of the prompt's usage by category."""


def _structured_output_tools(response_format: Any) -> list[Any]:
    """The structured-output schemas a ``response_format`` sends, as tool specs.

    A ``ToolStrategy`` gives the tools ``create_agent`` binds for it (built the
    same way, from its possibly narrowed ``schema_specs``). An ``AutoStrategy``
    or a bare schema is counted as that tool strategy: it is what is bound unless
    the model has native structured output, which sends the same schema. A
    ``ProviderStrategy`` gives its ``response_format`` payload.
    """
    if isinstance(response_format, ProviderStrategy):
        return [response_format.to_model_kwargs()["response_format"]]
    if isinstance(response_format, AutoStrategy):
        response_format = ToolStrategy(schema=response_format.schema)
    elif not isinstance(response_format, ToolStrategy):
        response_format = ToolStrategy(schema=response_format)
    specs = response_format.schema_specs
    return [OutputToolBinding.from_schema_spec(spec).tool for spec in specs]


def _policy_names() -> frozenset[str]:
    """What ``GuardPolicy`` accepts as a keyword: its fields and their aliases."""
    names = set(GuardPolicy.model_fields)
    for field in GuardPolicy.model_fields.values():
        choices = getattr(field.validation_alias, "choices", ())
        names.update(c for c in choices if isinstance(c, str))
    return frozenset(names)


_POLICY_NAMES = _policy_names()


def build_guard(
    guard: ContextGuard | GuardPolicy | None,
    *,
    model: Any = None,
    token_counter: Any = None,
    settings: dict[str, Any],
    owner: str = "GuardPolicy",
    own: Sequence[str] = (),
) -> ContextGuard:
    """A ``ContextGuard`` from what a middleware was given.

    A ready guard is used as is (settings and a counter then belong to it); a
    policy is updated with ``settings``; nothing gives ``GuardPolicy(**settings)``.
    A name that is no setting is refused as ``owner``'s, the nearest of the
    policy's fields and ``owner``'s ``own`` keywords suggested.
    """
    if isinstance(guard, ContextGuard):
        if settings or token_counter is not None:
            given = ", ".join(sorted(settings) or ["token_counter"])
            raise ConfigError(
                f"Got a ready ContextGuard and also {given}.",
                field=next(iter(sorted(settings)), "token_counter"),
                hint="set them on the guard (ContextGuard(GuardPolicy(...), "
                "token_counter=...)) or pass no guard.",
            )
        return guard
    if guard is not None and not isinstance(guard, GuardPolicy):
        raise ConfigError(
            f"guard must be a ContextGuard or a GuardPolicy, got "
            f"{type(guard).__name__}.",
            field="guard",
            hint="pass ContextGuard(...), GuardPolicy(...), or settings as keywords.",
        )
    for name in settings:
        if name not in _POLICY_NAMES:
            raise unknown_setting(owner, name, [*GuardPolicy.model_fields, *own])
    policy = guard.updated(**settings) if guard is not None else GuardPolicy(**settings)
    return ContextGuard(policy, token_counter=token_counter, model=model)


def warn_silent_overflow(
    response: Result,
    report: GuardReport,
    guard: ContextGuard | None = None,
    model: Any = None,
) -> Result:
    """Warn when the reply reports more input than the window (silent overflow).

    With ``guard``, also learn the limit (``note_silent_overflow``), so the next
    call is pruned under it.
    """
    messages = getattr(response, "result", None) or [response]
    replies = [m for m in messages if isinstance(m, AIMessage)]
    if not replies:
        return response
    if guard is not None:
        note_silent_overflow(replies[-1], guard, model, lambda: report.tokens_after)
        return response
    if report.window_source == "learned":  # a learned limit is in our units
        return response
    found = silent_overflow(replies[-1], report.context_window)
    if found is not None:
        logger.warning(
            "Context guard: %s (window %s from %s); the provider may have cut the "
            "prompt. Set context_window to the model's real window.",
            found.message,
            f"{report.context_window:,}",
            report.window_source,
        )
    return response


class RequestInputs:
    """What a model request sends that the budget must hold, the same on every path.

    The system message and messages, and the tools: ``request.tools`` plus the
    structured-output tools ``create_agent`` binds beside them. Every middleware
    that sends a request to a model counts it this way (``ContextGuardMiddleware``,
    the compaction fallback, overflow recovery).
    """

    def __init__(self) -> None:
        self._schemas: tuple[Any, list[Any]] | None = None

    def tools(self, request: ModelRequest[Any]) -> list[Any]:
        """``request.tools`` and the structured-output tools bound beside them."""
        response_format = request.response_format
        if response_format is None:
            return request.tools
        cached = self._schemas
        if cached is None or cached[0] is not response_format:
            # The same tool objects each call keep the guard's tool count cached.
            cached = (response_format, _structured_output_tools(response_format))
            self._schemas = cached
        return [*request.tools, *cached[1]]

    @staticmethod
    def messages(request: ModelRequest[Any]) -> list[BaseMessage]:
        """The system message (if any) followed by the messages."""
        head = [request.system_message] if request.system_message is not None else []
        return [*head, *request.messages]

    @staticmethod
    def apply(
        request: ModelRequest[Any],
        kept: list[BaseMessage],
        *,
        split_system: bool = False,
    ) -> ModelRequest[Any]:
        """``request`` sending ``kept`` (a leading system message as its system).

        ``split_system``: also when the request had none (a marked system message
        from the history then goes where the provider caches it).
        """
        system = request.system_message
        if (
            (system is not None or split_system)
            and kept
            and isinstance(kept[0], SystemMessage)
        ):
            system, kept = kept[0], kept[1:]
        if system is request.system_message and same_list(request.messages, kept):
            return request
        return request.override(
            messages=cast("list[AnyMessage]", kept), system_message=system
        )


def stamp_reply(
    response: Result,
    state: dict[str, Any] | None,
    usage: Usage = None,
) -> Result:
    """Keep the handover record (and the prompt's usage) in ``response_metadata``."""
    if not state and usage is None:
        return response
    messages = response.result if isinstance(response, ModelResponse) else [response]
    for message in messages:
        if isinstance(message, AIMessage):
            if state:
                message.response_metadata[STATE_KEY] = state
            if usage is not None:
                message.response_metadata[USAGE_KEY] = usage().to_dict()
            break
    return response
