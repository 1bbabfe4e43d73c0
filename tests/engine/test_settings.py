"""YAML and environment settings through pydantic-settings (``engine/_settings.py``).

Precedence, highest first: explicit > environment > ``.env`` > YAML > defaults.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import YamlConfigSettingsSource

from langchain_context_guard import ConfigError, GuardPolicy
from langchain_context_guard.engine._settings import YamlPolicySource, load_settings
from langchain_context_guard.engine._tool_policy import (
    last_tools,
    policy_for,
    whole_tools,
)

BLOCK = """\
agent:
  contextGuard:
    contextWindow: 64000
    reserveTokens: 6000
    keep_recent_tool_results: 5
    digest: true
"""


def write(tmp_path: Path, text: str, name: str = "guard.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_yaml_file_is_read_by_pydantic_settings_yaml_source(
    tmp_path: Path,
) -> None:
    source = YamlPolicySource(GuardPolicy, write(tmp_path, BLOCK))
    assert isinstance(source, YamlConfigSettingsSource)
    # The application block unwrapped, camelCase names mapped to the fields.
    assert source() == {
        "context_window": 64_000,
        "reserve_tokens": 6_000,
        "keep_recent_tool_results": 5,
        "digest": True,
    }


def test_explicit_over_environment_over_dotenv_over_yaml_over_defaults(
    tmp_path: Path,
) -> None:
    yaml_file = write(tmp_path, BLOCK)
    dotenv = write(
        tmp_path,
        "CONTEXT_GUARD_RESERVE_TOKENS=5000\nCONTEXT_GUARD_KEEP_RECENT_TOOL_RESULTS=4\n",
        ".env",
    )
    environ = {
        "CONTEXT_GUARD_KEEP_RECENT_TOOL_RESULTS": "2",
        "MAX_CONTEXT_TOKENS": "50000",
    }
    policy = GuardPolicy.from_env(
        environ, env_file=dotenv, yaml_file=yaml_file, digest=False
    )
    assert policy.digest is False  # explicit over YAML
    assert policy.keep_recent_tool_results == 2  # environment over .env over YAML
    assert policy.context_window == 50_000  # the older variable name over YAML
    assert policy.reserve_tokens == 5_000  # .env over YAML
    assert policy.compress_batch == GuardPolicy().compress_batch  # defaults
    # Explicit camelCase names win over the file's too.
    camel = GuardPolicy.from_yaml(yaml_file, reserveTokens=7_000, contextWindow=70_000)
    assert (camel.reserve_tokens, camel.context_window) == (7_000, 70_000)
    # The YAML alone, and with defaults below it.
    assert GuardPolicy.from_yaml(yaml_file).reserve_tokens == 6_000
    loaded = load_settings(
        GuardPolicy,
        yaml_file=yaml_file,
        defaults={"reserve_tokens": 1, "compress_batch": 6},
        read_env=False,
    )
    assert (loaded.reserve_tokens, loaded.compress_batch) == (6_000, 6)


def test_a_yaml_typo_names_the_file_line_key_and_closest_setting(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "context_window: 64000\nreserv_tokens: 6000\n")
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    message = str(info.value)
    assert message.startswith(
        f"{path} line 2: GuardPolicy: unknown setting 'reserv_tokens'"
    )
    assert message.endswith("Fix: did you mean 'reserve_tokens'?")
    assert info.value.field == "reserv_tokens"


def test_a_bad_yaml_value_names_the_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, BLOCK.replace("6000", "-5"))
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    assert str(info.value).startswith(f"{path} line 4: GuardPolicy.reserve_tokens")
    assert info.value.field == "reserve_tokens"


def test_a_bad_value_names_the_source_that_won(tmp_path: Path) -> None:
    path = write(tmp_path, "reserve_tokens: 6000\n")
    environ = {"CONTEXT_GUARD_RESERVE_TOKENS": "lots"}
    with pytest.raises(ConfigError, match="CONTEXT_GUARD_RESERVE_TOKENS='lots'"):
        GuardPolicy.from_env(environ, yaml_file=path)
    # A valid environment value hides a bad one in the file.
    bad = write(tmp_path, "reserve_tokens: lots\n", "bad.yaml")
    fixed = GuardPolicy.from_env({"CONTEXT_GUARD_RESERVE_TOKENS": "10"}, yaml_file=bad)
    assert fixed.reserve_tokens == 10


def test_a_document_that_is_not_a_mapping_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "- reserve_tokens\n- 6000\n")
    with pytest.raises(ConfigError, match=f"{path} must be a mapping, got list"):
        GuardPolicy.from_yaml(path)
    assert GuardPolicy.from_yaml(write(tmp_path, "", "empty.yaml")) == GuardPolicy()


def test_a_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "guard.yaml"
    path.write_bytes(b"reserve_tokens: 1000\ncomment: caf\xe9\n")  # Latin-1
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text")
    assert "save it as UTF-8" in str(info.value)


def test_pattern_keys_load_from_yaml_and_the_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tool_policies:\n"
        '  "mcp__github__*": {max_result_chars: 2000}\n'
        "  read_file: {keep_recent: 1}\n"
        'exclude_tools: ["mcp__slack__*"]\n',
    )
    loaded = GuardPolicy.from_yaml(path)
    assert list(loaded.tool_policies) == ["mcp__github__*", "read_file"]
    found = policy_for(loaded, "mcp__github__get_file")
    assert found is not None and found.max_result_chars == 2_000
    assert "mcp__slack__read" in whole_tools(loaded)
    environ = {
        "CONTEXT_GUARD_TOOL_POLICIES": '{"read_*": {"drop_last": true}}',
        "CONTEXT_GUARD_EXCLUDE_TOOLS": '["mcp__*"]',
    }
    from_env = GuardPolicy.from_env(environ)
    assert "read_spec" in last_tools(from_env)
    assert "mcp__github__get_file" in whole_tools(from_env)


def test_a_blank_tool_key_in_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'context_window: 64000\ntool_policies:\n  " ": {}\n')
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    assert str(info.value).startswith(f"{path} line 2: GuardPolicy.tool_policies")
    assert "pattern" in info.value.hint
