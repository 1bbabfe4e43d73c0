"""The ``CONTEXT_GUARD_*`` environment variables ``GuardPolicy.from_env`` reads."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ._errors import ConfigError

_ENV_PREFIX = "CONTEXT_GUARD_"
# Seed 003's names, kept for compatibility with its deployments.
_LEGACY_ENV = {
    "MAX_CONTEXT_TOKENS": "context_window",
    "MAX_CHARS_PER_MESSAGE": "max_chars_per_message",
}
_OTHER_ENV = {"OFFLINE", "TRAJECTORIES"}
"""``CONTEXT_GUARD_*`` variables that are not policy fields (tokenizer, replay)."""


def check_env_names(env: Mapping[str, str], fields: Mapping[str, Any]) -> None:
    """A misspelled ``CONTEXT_GUARD_*`` variable is an error, as a YAML typo is."""
    for var in env:
        name = var[len(_ENV_PREFIX) :]
        if not var.startswith(_ENV_PREFIX) or name in _OTHER_ENV:
            continue
        if name.lower() not in fields:
            names = [f.upper() for f in fields]
            close = difflib.get_close_matches(name, names, n=1)
            raise ConfigError(
                f"Environment variable {var} is not a GuardPolicy setting.",
                field=None,
                hint=f"did you mean {_ENV_PREFIX}{close[0]}? Else unset {var}."
                if close
                else f"unset {var} (settings are {_ENV_PREFIX}<FIELD>).",
            )
