"""``GuardPolicy.from_env`` through pydantic-settings (``engine/_env.py``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from langchain_context_guard import GuardPolicy


def test_names_are_case_insensitive_and_values_json() -> None:
    env = {
        "context_guard_reserve_tokens": "1234",
        "CONTEXT_GUARD_HISTORY_LIMITS": '{"dm": 4}',
    }
    p = GuardPolicy.from_env(env)
    assert (p.reserve_tokens, p.history_limits) == (1234, {"dm": 4})


def test_unknown_name_is_warned_once_with_the_closest_setting() -> None:
    env = {"CONTEXT_GUARD_RESERVE_TOKNS": "10", "CONTEXT_GUARD_OFFLINE": "1"}
    with pytest.warns(UserWarning, match="did you mean CONTEXT_GUARD_RESERVE_TOKENS"):
        p = GuardPolicy.from_env(env)
    assert p.reserve_tokens == GuardPolicy().reserve_tokens
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GuardPolicy.from_env(env)  # the same name is not warned again


def test_env_file_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "CONTEXT_GUARD_RESERVE_TOKENS=2000\nCONTEXT_GUARD_DIGEST=false\n",
        encoding="utf-8",
    )
    p = GuardPolicy.from_env({"CONTEXT_GUARD_RESERVE_TOKENS": "3000"}, env_file=dotenv)
    assert (p.reserve_tokens, p.digest) == (3000, False)
