"""Reading ``GuardPolicy`` settings from the environment through pydantic-settings.

``CONTEXT_GUARD_<FIELD>`` (any case) and the two older names (``MAX_CONTEXT_TOKENS``,
``MAX_CHARS_PER_MESSAGE``); a ``.env`` file
on request. Unknown ``CONTEXT_GUARD_*`` names are warned about once each.
"""

from __future__ import annotations

import difflib
import json
import os
import warnings
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import create_model
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource

ENV_PREFIX = "CONTEXT_GUARD_"
# Older deployments' variable names, still read.
LEGACY_ENV = {
    "MAX_CONTEXT_TOKENS": "context_window",
    "MAX_CHARS_PER_MESSAGE": "max_chars_per_message",
}
# CONTEXT_GUARD_* names that are not policy settings.
_OTHER_ENV = frozenset({"ENCODER", "OFFLINE", "TRAJECTORIES"})
_warned_env: set[str] = set()


@lru_cache(maxsize=4)
def _env_model(fields: tuple[str, ...]) -> type[BaseSettings]:
    """Every policy field as an optional string setting (parsed by ``from_env``)."""
    spec: dict[str, Any] = {name: (str | None, None) for name in fields}
    model: type[BaseSettings] = create_model(
        "GuardPolicyEnv", __base__=BaseSettings, **spec
    )
    return model


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]):
        self._given = {k.lower(): v for k, v in env.items()}
        super().__init__(settings_cls, env_prefix=ENV_PREFIX, case_sensitive=False)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._given


def read_env(
    fields: list[str],
    environ: Mapping[str, str] | None,
    env_file: str | Path | None,
) -> tuple[dict[str, str], list[str]]:
    """Values by field name (legacy names lowercased), and the prefixed names seen.

    ``environ`` defaults to ``os.environ``; ``env_file`` adds a ``.env`` file
    (the environment wins).
    """
    model = _env_model(tuple(fields))
    env: dict[str, str] = dict(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    if env_file is not None:
        dotenv = DotEnvSettingsSource(
            model, env_file=env_file, env_prefix=ENV_PREFIX, case_sensitive=False
        )
        values.update(dotenv())
        found = {k: v for k, v in dotenv.env_vars.items() if v is not None}
        env = {**found, **env}
    values.update(_MappingSource(model, env)())
    for name in LEGACY_ENV:
        for key, value in env.items():
            if key.upper() == name and value:
                values[name.lower()] = value
    names = [k.upper() for k in env if k.upper().startswith(ENV_PREFIX)]
    return {k: str(v) for k, v in values.items() if v is not None}, names


def warn_unknown(names: list[str], fields: list[str]) -> None:
    """Warn once per unknown ``CONTEXT_GUARD_*`` name, naming the closest setting."""
    known = [f.upper() for f in fields]
    for var in names:
        rest = var[len(ENV_PREFIX) :]
        if rest in known or rest in _OTHER_ENV or var in _warned_env:
            continue
        _warned_env.add(var)
        close = difflib.get_close_matches(rest, known, n=1)
        also = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
        warnings.warn(
            f"langchain-context-guard: unknown environment variable {var} is "
            f"ignored{also}",
            UserWarning,
            stacklevel=5,  # GuardPolicy.from_env's caller
        )


def env_settings(
    fields: list[str],
    environ: Mapping[str, str] | None,
    env_file: str | Path | None,
) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """Parsed values by field, and the variable and text each came from.

    A ``CONTEXT_GUARD_<FIELD>`` wins over an older name for the same field.
    Unknown ``CONTEXT_GUARD_*`` names are warned about (``warn_unknown``).
    """
    values, names = read_env(fields, environ, env_file)
    data: dict[str, Any] = {}
    source: dict[str, tuple[str, str]] = {}
    for name, field in LEGACY_ENV.items():
        if values.get(name.lower()):
            data[field] = values[name.lower()]
            source[field] = (name, values[name.lower()])
    for name in fields:
        value = values.get(name)
        if value:
            data[name] = parse_env(value)
            source[name] = (ENV_PREFIX + name.upper(), value)
    warn_unknown(names, fields)
    return data, source


def parse_env(value: str) -> Any:
    """JSON when the value parses as JSON, else the text."""
    try:
        return json.loads(value)
    except ValueError:
        return value
