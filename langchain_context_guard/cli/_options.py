"""Errors and policy loading shared by the CLI's commands."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engine._errors import ConfigError
from ..engine._policy import GuardPolicy

__all__ = ["CommandError", "load_policy", "warn_default_window"]


class CommandError(Exception):
    """A failure the CLI reports in one line (exit code 2)."""


def load_policy(
    *,
    config: Path | None = None,
    flags: Mapping[str, Any] | None = None,
    defaults: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> GuardPolicy:
    """A policy from defaults < environment < YAML file < flags (None flags unset)."""
    data: dict[str, Any] = dict(defaults or {})
    try:
        from_env = GuardPolicy.from_env(environ)
    except ConfigError as exc:
        raise CommandError(f"environment (CONTEXT_GUARD_*): {exc}") from None
    data.update(_explicit(from_env))
    if config is not None:
        data.update(_explicit(_policy_file(config)))
    data.update({k: v for k, v in (flags or {}).items() if v is not None})
    return GuardPolicy(**data)


def _explicit(policy: GuardPolicy) -> dict[str, Any]:
    return {name: getattr(policy, name) for name in policy.model_fields_set}


def _policy_file(path: Path) -> GuardPolicy:
    """Load ``path`` with GuardPolicy.from_yaml, naming the file and line on error."""
    try:
        return GuardPolicy.from_yaml(path)
    except ConfigError as exc:
        if str(path) in str(exc):  # unreadable file or YAML syntax: already located
            raise
        line = _key_line(path, exc.field)
        where = f"{path} line {line}" if line else str(path)
        raise CommandError(f"{where}: {exc}") from None


def _key_line(path: Path, field: str | None) -> int | None:
    """The 1-based line of the YAML key that names ``field``, if there is one."""
    import yaml

    if not field:
        return None
    names = {field, field.split(".")[0]}
    info = GuardPolicy.model_fields.get(field)
    names.update(getattr(info and info.validation_alias, "choices", ()))
    try:
        stack = [yaml.compose(path.read_text(encoding="utf-8"))]
    except (OSError, yaml.YAMLError):
        return None
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if getattr(key, "value", None) in names:
                    return int(key.start_mark.line) + 1
                stack.append(value)
    return None


def warn_default_window(name: str | None, tokens: int, source: str) -> None:
    """Warn (the CLI prints it once) when a named model's window was not known."""
    if name and source == "default":
        warnings.warn(
            f"--model {name}: no known context window; using the default "
            f"{tokens:,} tokens (set --window to the model's window)",
            UserWarning,
            stacklevel=2,
        )
