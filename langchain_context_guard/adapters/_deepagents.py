"""The guard in every agent of a deepagents ``create_deep_agent``.

```python
agent = create_deep_agent(model, tools, middleware=[ContextGuardMiddleware()],
                          subagents=guarded_subagents([researcher]))
```

``middleware=[...]`` guards the main agent only: deepagents gives a sub-agent
(its general-purpose one included) just the middleware that replaces one of its
own default slots by name. A declarative sub-agent spec's own ``middleware``
does reach it, so ``guarded_subagents`` returns the specs with a guard of their
own, and a general-purpose spec (deepagents' own, which a spec of that name
replaces) unless one is given. Each sub-agent gets its own guard: its window is
read from its own model on each call. deepagents loads on first use only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..engine import ConfigError
from ._middleware import ContextGuardMiddleware

GENERAL_PURPOSE = "general-purpose"
"""The name of deepagents' built-in sub-agent."""


def _general_purpose_spec() -> dict[str, Any]:
    try:
        from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT
    except ImportError as exc:  # pragma: no cover - exercised without deepagents
        raise ImportError(
            "guarded_subagents needs deepagents. Install it with: "
            "pip install deepagents"
        ) from exc
    return dict(GENERAL_PURPOSE_SUBAGENT)


def _guarded(spec: Mapping[str, Any], guard: Callable[[], Any]) -> dict[str, Any]:
    middleware = list(spec.get("middleware") or [])
    if any(isinstance(m, ContextGuardMiddleware) for m in middleware):
        return dict(spec)
    return {**spec, "middleware": [*middleware, guard()]}


def guarded_subagents(
    subagents: Sequence[Mapping[str, Any]] = (),
    *,
    guard: Callable[[], Any] | None = None,
    general_purpose: bool = True,
    skills: list[str] | None = None,
    **settings: Any,
) -> list[dict[str, Any]]:
    """``create_deep_agent(subagents=...)`` specs, each with a guard of its own.

    Args:
        subagents: Declarative sub-agent specs (``SubAgent`` dicts); a spec that
            already holds a ``ContextGuardMiddleware`` is kept as it is, a remote
            one (``graph_id``) is passed through (guard it where it runs).
        guard: Makes each sub-agent's guard; by default
            ``ContextGuardMiddleware(**settings)``.
        general_purpose: Add deepagents' general-purpose sub-agent, guarded,
            unless ``subagents`` names one.
        skills: The general-purpose sub-agent's skill sources (deepagents gives
            its own one the main agent's ``skills``).
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
        out.append(dict(spec) if "graph_id" in spec else _guarded(spec, make))
    if general_purpose and not any(s.get("name") == GENERAL_PURPOSE for s in out):
        spec = _general_purpose_spec()
        if skills is not None:
            spec["skills"] = skills
        out.insert(0, _guarded(spec, make))
    return out
