"""The guard in every agent of a deepagents ``create_deep_agent``.

```python
summarize = guarded_summarization(model)
agent = create_deep_agent(
    model, tools, middleware=[ContextGuardMiddleware(), summarize],
    subagents=guarded_subagents([researcher], middleware=[summarize]))
```

``middleware=[...]`` guards the main agent only: deepagents gives a sub-agent
(its general-purpose one included) just the middleware that replaces one of its
own default slots by name. A declarative sub-agent spec's own ``middleware``
does reach it, so ``guarded_subagents`` returns the specs with a guard of their
own, and a general-purpose spec (deepagents' own, which a spec of that name
replaces) unless one is given. Each sub-agent gets its own guard: its window is
read from its own model on each call.

deepagents' own summary call sends the older history to the model with no
guard in between, counted as characters / 4. ``guarded_summarization`` is
deepagents' summarization with the guard's token count: it triggers on real
tokens, and the guard fits what it summarises to the summary request's budget,
keeping the task and the newest results (LangChain's own trimming keeps only
what follows a user turn: in an agent's tool loop, nothing). Its name takes
deepagents' summarization slot. deepagents loads on first use.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, get_buffer_string
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from ..engine import ConfigError, ContextGuard, GuardPolicy
from ._middleware import ContextGuardMiddleware

SUMMARIZER_HOOK = "0.7.26"
"""The first deepagents with ``create_summarization_middleware(summarizer=...)``."""
GENERAL_PURPOSE = "general-purpose"
"""The name of deepagents' built-in sub-agent."""


SUMMARY_SHARE = 0.9
"""The share of the budget left after the summary prompt that the history may use
(the history is sent formatted as text, which counts a little more)."""


def _deepagents(name: str) -> Any:
    try:
        import deepagents
    except ImportError as exc:  # pragma: no cover - exercised without deepagents
        raise ImportError(
            f"{name} needs deepagents. Install it with: pip install deepagents"
        ) from exc
    return deepagents


def _fitted_summary(model: Any, prompt: str, fit: ContextGuard) -> Runnable[Any, str]:
    """The summary call of deepagents, on the history ``fit`` keeps in its budget."""

    def ask(messages: list[BaseMessage]) -> str:
        kept = fit.prepare(messages).messages
        return prompt.format(messages=get_buffer_string(kept, format="xml")).rstrip()

    def summarize(messages: list[BaseMessage], config: RunnableConfig) -> str:
        return str(model.invoke(ask(messages), config).text).strip()

    async def asummarize(messages: list[BaseMessage], config: RunnableConfig) -> str:
        reply = await model.ainvoke(ask(messages), config)
        return str(reply.text).strip()

    return RunnableLambda(summarize, afunc=asummarize, name="guarded_summary")


def has_summarizer_hook() -> bool:
    """Whether deepagents has the ``summarizer=`` hook of its summarization."""
    try:
        from deepagents.middleware.summarization import (
            create_summarization_middleware,
        )
    except ImportError:
        return False
    return "summarizer" in inspect.signature(create_summarization_middleware).parameters


def guarded_summarization(
    model: Any, backend: Any = None, *, guard: ContextGuard | None = None
) -> Any:
    """The summarization middleware of deepagents, counting with the guard.

    Args:
        model: The chat model that summarises (the agent's).
        backend: Where deepagents offloads the summarised history; its default
            ``StateBackend()`` when None (use the agent's own ``backend``).
        guard: The ``ContextGuard`` that counts and sets the budget; by default
            one for ``model``'s window.
    """
    _deepagents("guarded_summarization")
    from deepagents.backends import StateBackend
    from deepagents.middleware.summarization import (
        DEEPAGENTS_DEFAULT_SUMMARY_PROMPT,
        create_summarization_middleware,
    )

    if not has_summarizer_hook():
        raise ConfigError(
            "guarded_summarization needs deepagents' summarizer= hook, which this "
            "deepagents version lacks.",
            field="deepagents",
            hint=f'pip install "deepagents>={SUMMARIZER_HOOK}"',
        )
    counter = guard or ContextGuard(GuardPolicy(), model=model)
    prompt = counter.count_tokens([HumanMessage(DEEPAGENTS_DEFAULT_SUMMARY_PROMPT)])
    room = int((counter.budget(model) - prompt) * SUMMARY_SHARE)
    if room <= 0:
        raise ConfigError(
            f"The summary prompt ({prompt:,} tokens) leaves no room for the "
            "history in the budget.",
            field="model",
            hint="use a model with a larger window to summarise.",
        )
    fit = ContextGuard(
        counter.policy.model_copy(
            update={
                "context_window": room,
                "reserve_tokens": 0,
                "hard_min_tokens": 0,
                "warn_below_tokens": 0,
            }
        ),
        token_counter=counter.counter,
    )
    return create_summarization_middleware(
        model,
        backend if backend is not None else StateBackend(),
        token_counter=counter.count_tokens,
        summarizer=_fitted_summary(model, DEEPAGENTS_DEFAULT_SUMMARY_PROMPT, fit),
    )


def _general_purpose_spec() -> dict[str, Any]:
    _deepagents("guarded_subagents")
    from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT

    return dict(GENERAL_PURPOSE_SUBAGENT)


def _guarded(
    spec: Mapping[str, Any], guard: Callable[[], Any], extra: Sequence[Any]
) -> dict[str, Any]:
    middleware = list(spec.get("middleware") or [])
    names = {m.name for m in middleware}
    middleware += [m for m in extra if m.name not in names]
    if not any(isinstance(m, ContextGuardMiddleware) for m in middleware):
        middleware.append(guard())
    return {**spec, "middleware": middleware}


def guarded_subagents(
    subagents: Sequence[Mapping[str, Any]] = (),
    *,
    guard: Callable[[], Any] | None = None,
    general_purpose: bool = True,
    skills: list[str] | None = None,
    middleware: Sequence[Any] = (),
    **settings: Any,
) -> list[dict[str, Any]]:
    """``create_deep_agent(subagents=...)`` specs, each with a guard of its own.

    Args:
        subagents: Declarative sub-agent specs (``SubAgent`` dicts); a spec that
            already holds a ``ContextGuardMiddleware`` keeps it, a remote one
            (``graph_id``) is passed through (guard it where it runs).
        guard: Makes each sub-agent's guard; by default
            ``ContextGuardMiddleware(**settings)``.
        general_purpose: Add deepagents' general-purpose sub-agent, guarded,
            unless ``subagents`` names one.
        skills: The general-purpose sub-agent's skill sources (deepagents gives
            its own one the main agent's ``skills``).
        middleware: More middleware for every spec that has none of that name
            (``guarded_summarization(model)`` for the sub-agents' summaries).
        **settings: ``ContextGuardMiddleware`` keywords for the default ``guard``.

    Raises:
        ConfigError: A compiled sub-agent (``runnable``), which no spec
            middleware reaches, or both ``guard`` and ``settings``.
    """
    if guard is not None and settings:
        raise ConfigError(
            f"Got guard and also {', '.join(sorted(settings))}.",
            field="guard",
            hint="set them on the guard the factory makes, or pass settings only.",
        )
    make = guard or (lambda: ContextGuardMiddleware(**settings))
    out: list[dict[str, Any]] = []
    for spec in subagents:
        if "runnable" in spec:
            raise ConfigError(
                f"Sub-agent {spec.get('name')!r} is compiled: no spec middleware "
                "reaches it.",
                field="subagents",
                hint="build its graph with ContextGuardMiddleware() in its own "
                "middleware (create_agent / create_deep_agent), then pass it.",
            )
        remote = "graph_id" in spec
        out.append(dict(spec) if remote else _guarded(spec, make, middleware))
    if general_purpose and not any(s.get("name") == GENERAL_PURPOSE for s in out):
        spec = _general_purpose_spec()
        if skills is not None:
            spec["skills"] = skills
        out.insert(0, _guarded(spec, make, middleware))
    return out
