"""Errors and policy loading shared by the CLI's commands."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engine import ConfigError, GuardPolicy, load_settings

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
    """A policy from flags > environment > YAML file > defaults (None flags unset).

    The library's own precedence (``GuardPolicy.from_env``); a bad setting names
    the flag, the variable, or the file, line and key it came from.
    """
    explicit = {k: v for k, v in (flags or {}).items() if v is not None}
    try:
        return load_settings(
            GuardPolicy,
            explicit=explicit,
            environ=environ,
            yaml_file=config,
            defaults=defaults,
        )
    except ConfigError as exc:
        raise _name_the_flag(exc, config) from None


def _name_the_flag(exc: ConfigError, config: Path | None) -> Exception:
    """``exc`` as ``--config PATH...`` when it is about the YAML file."""
    message, unreadable = str(exc), f"Cannot read config file {config}: "
    if config is None:
        return exc
    if message.startswith(unreadable):
        why, _, fix = message.removeprefix(unreadable).partition(" Fix: ")
        return CommandError(
            f"--config {config}: cannot read ({why.rstrip('.')}); {fix}"
        )
    if message.startswith(str(config)):
        return CommandError(f"--config {message}")
    return exc


def warn_default_window(name: str | None, tokens: int, source: str) -> None:
    """Warn (the CLI prints it once) when a named model's window was not known."""
    if name and source == "default":
        warnings.warn(
            f"--model {name}: no known context window; using the default "
            f"{tokens:,} tokens (set --window to the model's window)",
            UserWarning,
            stacklevel=2,
        )
