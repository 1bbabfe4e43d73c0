import logging

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import HumanMessage

from langchain_context_guard import (
    ContextGuard,
    GuardPolicy,
    WindowInfo,
    WindowTooSmallError,
)


def _model(**kwargs):
    return FakeMessagesListChatModel(responses=[], **kwargs)


class Named:
    def __init__(self, name):
        self.model_name = name


def test_default_when_nothing_is_known():
    assert ContextGuard().window() == WindowInfo(128_000, "default", False)


def test_model_profile_max_input_tokens():
    guard = ContextGuard(model=_model(profile={"max_input_tokens": 200_000}))
    assert guard.window() == WindowInfo(200_000, "model_profile", False)


def test_built_in_table_by_model_name():
    assert ContextGuard().window(Named("claude-3-5-sonnet-latest")).tokens == 200_000
    assert ContextGuard().window(Named("anthropic/claude-x")).source == "table"
    assert ContextGuard().window("gpt-4o-mini").tokens == 128_000


def test_profile_beats_table():
    model = _model(profile={"max_input_tokens": 50_000})
    model.__dict__["model_name"] = "gpt-4o"
    assert ContextGuard(model=model).window().source == "model_profile"


def test_learned_limit_beats_profile():
    guard = ContextGuard(
        GuardPolicy(model="m"), model=_model(profile={"max_input_tokens": 200_000})
    )
    guard.limits.learn("m", 90_000)
    assert guard.window() == WindowInfo(90_000, "learned", False)


def test_override_beats_everything_but_a_smaller_learned_limit():
    guard = ContextGuard(
        GuardPolicy(context_window=100_000, model="m"),
        model=_model(profile={"max_input_tokens": 200_000}),
    )
    assert guard.window() == WindowInfo(100_000, "override", False)
    guard.limits.learn("m", 150_000)
    assert guard.window().source == "override"
    guard.limits.learn("m", 60_000)
    assert guard.window() == WindowInfo(60_000, "learned", False)


def test_refuses_windows_below_16k_before_any_work():
    guard = ContextGuard(model=_model(profile={"max_input_tokens": 8_192}))
    with pytest.raises(WindowTooSmallError) as info:
        guard.prepare([HumanMessage("hi")])
    err = info.value
    assert (err.window, err.minimum, err.source) == (8_192, 16_000, "model_profile")
    assert "8,192" in str(err) and "Fix:" in str(err)


def test_advice_for_a_context_window_the_user_set_names_the_fix_once():
    with pytest.raises(WindowTooSmallError) as info:
        ContextGuard(GuardPolicy(context_window=8_000, reserve_tokens=1_000)).window()
    text = str(info.value)
    assert "set by GuardPolicy.context_window" in text
    for fact in ("8,000", "16,000", "context_window", "hard_min_tokens"):
        assert text.count(fact) == 1, fact
    assert "reserve_tokens" in text.split("Fix:")[1]


def test_advice_for_a_detected_window_offers_context_window():
    guard = ContextGuard(model=_model(profile={"max_input_tokens": 8_192}))
    with pytest.raises(WindowTooSmallError) as info:
        guard.window()
    fix = str(info.value).split("Fix:")[1]
    assert "context_window" in fix and "hard_min_tokens" in fix


def test_a_learned_window_below_the_hard_minimum_is_used():
    guard = ContextGuard(GuardPolicy(model="m"))
    guard.learn_limit("m", 8_192)
    assert guard.window() == WindowInfo(8_192, "learned", True)
    assert guard.prepare([HumanMessage("hi")]).report.context_window == 8_192


def test_an_absurd_limit_is_not_learned():
    guard = ContextGuard(GuardPolicy(context_window=64_000, model="m"))
    event = guard.learn_limit("m", 100)
    assert event is not None and event.kind == "limit_ignored"
    assert guard.window() == WindowInfo(64_000, "override", False)


def test_warns_below_32k_once_per_guard_and_model(caplog):
    guard = ContextGuard(GuardPolicy(context_window=20_000, reserve_tokens=2_000))
    with caplog.at_level(logging.INFO, logger="langchain_context_guard"):
        first = guard.prepare([HumanMessage("hi")])
        later = [guard.prepare([HumanMessage(f"hi {k}")]) for k in range(3)]
        other = guard.prepare([HumanMessage("hello")], model="other-model")
    assert [e.kind for e in first.report.events] == ["window_warning"]
    assert "20,000" in first.report.events[0].detail
    assert [e for r in later for e in r.report.events] == []
    assert [e.kind for e in other.report.events] == ["window_warning"]
    records = [r for r in caplog.records if "window" in r.getMessage()]
    assert len(records) == 2


def test_exactly_at_the_thresholds():
    assert (
        ContextGuard(GuardPolicy(context_window=16_000, reserve_tokens=1_000))
        .window()
        .should_warn
    )
    assert (
        not ContextGuard(GuardPolicy(context_window=32_000, reserve_tokens=1_000))
        .window()
        .should_warn
    )


def test_thresholds_are_configurable():
    guard = ContextGuard(
        GuardPolicy(
            context_window=4_000,
            reserve_tokens=500,
            hard_min_tokens=1_000,
            warn_below_tokens=2_000,
        )
    )
    assert guard.window() == WindowInfo(4_000, "override", False)
