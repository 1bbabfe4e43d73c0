import textwrap

import pytest
from langchain_core.messages import HumanMessage

from langchain_context_guard import ConfigError, ContextGuard, GuardPolicy
from langchain_context_guard.engine._policy_checks import MIN_BUDGET_TOKENS
from langchain_context_guard.engine._window import default_reserve

SEED_000_YAML = """\
# config.yaml
agent:
  contextGuard:
    enabled: true                    # on by default
    maxToolResultChars: 50000        # cap on one tool output
    reserveTokens: 8192              # kept free for the reply
    truncateHeadChars: 2000          # head kept when truncating
    truncateTailChars: 2000          # tail kept when truncating
    contextWindowOverride: null      # overrides the model's window (optional)
"""


def test_defaults_follow_the_seeds():
    p = GuardPolicy()
    assert (p.max_tool_result_chars, p.truncate_head_chars, p.truncate_tail_chars) == (
        50_000,
        2_000,
        2_000,
    )
    assert (p.compress_min_chars, p.keep_recent_thinking) == (500, 1)
    assert (p.compress_head_lines, p.compress_tail_lines) == (3, 2)
    assert (p.hard_min_tokens, p.warn_below_tokens) == (16_000, 32_000)
    assert p.budget(100_000) == 100_000 - p.reserve_tokens


def test_defaults_tuned_on_the_replay_say_why():
    p = GuardPolicy()
    assert (p.keep_recent_tool_results, p.compress_trigger) == (3, 0.5)
    assert (p.trim_step, p.compress_batch) == (0.5, 4)
    fields = GuardPolicy.model_fields
    assert (p.compress_assistant_text, p.compress_min_share) == (True, 0.01)
    for name in (
        "keep_recent_tool_results",
        "compress_trigger",
        "compress_assistant_text",
        "compress_min_share",
    ):
        assert "replay" in (fields[name].description or "").lower(), name
    assert (p.safety_margin, p.uncalibrated_margin) == (0.03, 0.05)


def test_every_field_is_documented():
    assert all(f.description for f in GuardPolicy.model_fields.values())


def test_from_dict_with_snake_or_camel_case():
    p = GuardPolicy.from_dict({"reserveTokens": 1_000, "context_window": 40_000})
    assert (p.reserve_tokens, p.context_window) == (1_000, 40_000)


def test_seed_000_yaml_block(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(SEED_000_YAML)
    p = GuardPolicy.from_yaml(path)
    assert p.enabled and p.context_window is None
    assert (p.max_tool_result_chars, p.reserve_tokens) == (50_000, 8_192)
    override = tmp_path / "override.yaml"
    override.write_text(SEED_000_YAML.replace("null", "64000"))
    assert GuardPolicy.from_yaml(override).context_window == 64_000


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "agent:\n  contextGuard:\n    reserveTokens: [1, 2\n    enabled: true\n"
    )
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    assert str(path) in str(info.value)
    assert "line " in str(info.value)


def test_missing_yaml_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read config file"):
        GuardPolicy.from_yaml(tmp_path / "nope.yaml")


def test_non_mapping_config_is_a_config_error():
    with pytest.raises(ConfigError, match="mapping"):
        GuardPolicy.from_dict([1, 2])  # type: ignore[arg-type]


def test_from_env_reads_seed_003_and_prefixed_variables():
    env = {
        "MAX_CONTEXT_TOKENS": "48000",
        "MAX_CHARS_PER_MESSAGE": "20000",
        "CONTEXT_GUARD_RESERVE_TOKENS": "4000",
        "CONTEXT_GUARD_HISTORY_LIMITS": '{"dm": 3}',
        "CONTEXT_GUARD_KEEP_FIRST_USER": "false",
        "CONTEXT_GUARD_MODEL": "gpt-4o",
    }
    p = GuardPolicy.from_env(env)
    assert p.context_window == 48_000 and p.max_chars_per_message == 20_000
    assert p.reserve_tokens == 4_000 and p.history_limits == {"dm": 3}
    assert p.keep_first_user is False and p.model == "gpt-4o"
    assert GuardPolicy.from_env(env, reserve_tokens=100).reserve_tokens == 100


def test_bad_env_value_names_the_variable():
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_env({"CONTEXT_GUARD_RESERVE_TOKENS": "lots"})
    assert "CONTEXT_GUARD_RESERVE_TOKENS='lots'" in str(info.value)
    assert info.value.field == "reserve_tokens"


@pytest.mark.parametrize(
    ("data", "field", "text"),
    [
        ({"reserve_tokens": -1}, "reserve_tokens", "greater than or equal to 0"),
        ({"context_window": 0}, "context_window", "greater than 0"),
        (
            {"max_tool_result_share": 2},
            "max_tool_result_share",
            "less than or equal to 1",
        ),
        (
            {"context_window": 10_000, "reserve_tokens": 10_000},
            "reserve_tokens",
            "smaller than context_window",
        ),
        (
            {"truncate_head_chars": 30_000, "truncate_tail_chars": 30_000},
            "truncate_head_chars",
            "below max_tool_result_chars",
        ),
        ({"history_limit": "many"}, "history_limit", "valid integer"),
    ],
    ids=[
        "negative-reserve",
        "zero-window",
        "share>1",
        "reserve>=window",
        "head+tail",
        "not-int",
    ],
)
def test_bad_values_name_the_field_and_the_fix(data, field, text):
    with pytest.raises(ConfigError) as info:
        GuardPolicy(**data)
    assert info.value.field == field
    assert text in str(info.value)
    assert "Fix:" in str(info.value)


def test_an_unknown_setting_names_the_nearest_one_only():
    with pytest.raises(ConfigError) as info:
        GuardPolicy(reserve_token=1)
    assert str(info.value) == (
        "GuardPolicy: unknown setting 'reserve_token'. "
        "Fix: did you mean 'reserve_tokens'?"
    )
    assert info.value.field == "reserve_token"
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_dict({"zzzz": 10})
    assert "context_window" not in str(info.value)  # no list of every field
    assert "Fix: remove it; GuardPolicy's settings are listed in" in str(info.value)


def test_policy_is_frozen():
    p = GuardPolicy()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        p.reserve_tokens = 1  # type: ignore[misc]


def test_turn_limit_per_session_kind():
    p = GuardPolicy(history_limit=10, history_limits={"dm": 2})
    assert p.turn_limit("dm") == 2
    assert p.turn_limit("group") == 10
    assert p.turn_limit(None) == 10


def test_yaml_config_error_inside_block_names_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        textwrap.dedent("""\
        contextGuard:
          reserveTokens: -5
        """)
    )
    with pytest.raises(ConfigError) as info:
        GuardPolicy.from_yaml(path)
    assert info.value.field == "reserveTokens" or info.value.field == "reserve_tokens"


def test_a_reserve_larger_than_any_window_is_refused_at_construction():
    with pytest.raises(ConfigError, match=r"reserve_tokens \(999,999\)") as info:
        GuardPolicy(reserve_tokens=999_999)
    assert info.value.field == "reserve_tokens"


def test_a_reserve_larger_than_the_resolved_window_names_the_reserve():
    policy = GuardPolicy(reserve_tokens=50_000, hard_min_tokens=0)
    guard = ContextGuard(policy, model="gpt-4")  # an 8k window
    with pytest.raises(ConfigError, match="reserve_tokens") as info:
        guard.prepare([HumanMessage("hi")])
    assert "system prompt" not in str(info.value)


def test_an_unset_reserve_is_an_eighth_of_the_window_at_most_8192():
    assert GuardPolicy(context_window=16_000).budget(16_000) == 14_000
    assert GuardPolicy(context_window=32_000).reserve(32_000) == 4_000
    assert GuardPolicy().reserve(200_000) == 8_192
    assert GuardPolicy(reserve_tokens=8_192).reserve(16_000) == 8_192  # set: kept
    assert default_reserve(1_000) == 125


def test_a_reserve_that_leaves_nothing_is_refused():
    with pytest.raises(ConfigError, match=r"reserve_tokens \(2,000\) must be"):
        GuardPolicy(context_window=1_000, reserve_tokens=2_000)


@pytest.mark.parametrize(
    ("var", "suggestion"),
    [
        ("CONTEXT_GUARD_RESERVE_TOKEN", "CONTEXT_GUARD_RESERVE_TOKENS"),
        ("CONTEXT_GUARD_CONTEXTWINDOW", "CONTEXT_GUARD_CONTEXT_WINDOW"),
        ("CONTEXT_GUARD_NONSENSE_THING", "is ignored"),
    ],
)
def test_a_misspelled_environment_variable_is_named_in_a_warning(
    var, suggestion, monkeypatch
):
    from langchain_context_guard.engine import _env

    monkeypatch.setattr(_env, "_warned_env", set())
    with pytest.warns(UserWarning, match=var) as caught:
        policy = GuardPolicy.from_env({var: "10", "CONTEXT_GUARD_OFFLINE": "1"})
    assert suggestion in str(caught[0].message)
    assert policy == GuardPolicy()


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"history_limit": 0}, "history_limit"),
        ({"history_limit": -1}, "history_limit"),
        ({"history_limits": {"chat": 0}}, "history_limits.chat"),
        ({"history_limits": {"chat": -1}}, "history_limits.chat"),
    ],
    ids=["limit-0", "limit-negative", "limits-0", "limits-negative"],
)
def test_turn_limits_below_one_are_refused_alike(settings, field):
    with pytest.raises(ConfigError, match="at least 1") as info:
        GuardPolicy(**settings)
    assert info.value.field == field
    assert "leave" in info.value.hint  # how to say "no limit"


def test_turn_limits_of_one_and_none_are_accepted():
    policy = GuardPolicy(history_limit=None, history_limits={"dm": 1})
    assert (policy.turn_limit("dm"), policy.turn_limit("group")) == (1, None)


@pytest.mark.parametrize(
    "settings",
    [
        {"context_window": 20_000, "reserve_tokens": 19_999},
        {"context_window": 200, "reserve_tokens": 150, "hard_min_tokens": 0},
        {"reserve_tokens": 127_990},  # of the default 128k window
    ],
    ids=["explicit-window", "tiny-window", "default-window"],
)
def test_a_budget_with_no_room_for_a_turn_is_refused_at_construction(settings):
    with pytest.raises(ConfigError, match="leaves a budget of") as info:
        GuardPolicy(**settings)
    assert info.value.field == "reserve_tokens"
    assert "context_window" in str(info.value)
    assert f"{MIN_BUDGET_TOKENS}" in str(info.value)


def test_the_smallest_budget_is_accepted():
    policy = GuardPolicy(
        context_window=MIN_BUDGET_TOKENS + 10, reserve_tokens=10, hard_min_tokens=0
    )
    assert policy.budget(policy.context_window or 0) == MIN_BUDGET_TOKENS
