import importlib

import langchain_context_guard


def test_all_is_sorted():
    names = langchain_context_guard.__all__

    # isort-style, as ruff's RUF022 sorts it: CONSTANTS, Classes, then the rest.
    def group(name):
        if name.isupper():
            return 0
        return 1 if name[0].isupper() else 2

    assert names == sorted(names, key=lambda n: (group(n), n))


def test_all_imports_are_exported():
    module = importlib.import_module("langchain_context_guard")
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    public = {n for n in dir(module) if not n.startswith("_")}
    engine = {
        "ContextGuard",
        "GuardPolicy",
        "PrepareResult",
        "GuardReport",
        "GuardEvent",
        "ContextGuardError",
        "ConfigError",
        "InvalidInputError",
        "WindowTooSmallError",
        "BudgetExceededError",
        "CompactionError",
        "ContextOverflowError",
        "sanitize_messages",
        "truncate_tool_results",
        "compress_old_tool_results",
        "strip_old_thinking",
        "trim_to_budget",
        "trim_history",
        "repair_tool_pairs",
        "enforce_provider_hygiene",
        "reference_prepare",
        "truncate_text",
        "compress_lines",
        "TiktokenCounter",
        "CallableCounter",
        "TokenCounter",
        "count_messages",
        "MARKER_KEY",
        "classify_overflow",
        "OverflowInfo",
        "WindowInfo",
        "TokenizerFallbackWarning",
    }
    assert engine <= set(module.__all__)
    assert engine <= public


def test_error_tree():
    from langchain_context_guard import (
        BudgetExceededError,
        CompactionError,
        ConfigError,
        ContextGuardError,
        ContextOverflowError,
        InvalidInputError,
        WindowTooSmallError,
    )

    for error in (
        BudgetExceededError,
        CompactionError,
        ConfigError,
        ContextOverflowError,
        InvalidInputError,
        WindowTooSmallError,
    ):
        assert issubclass(error, ContextGuardError)


def test_errors_cross_a_process_boundary_as_they_were():
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    lcg = langchain_context_guard
    errors = [
        lcg.ConfigError("GuardPolicy.prune_to: must be above 0.", field="prune_to"),
        lcg.InvalidInputError("message 3: no role.", index=3),
        lcg.WindowTooSmallError(900, 1_000, "override"),
        lcg.BudgetExceededError(20_000, 14_000, 16_000, "the task", tool="Read"),
        lcg.CompactionError("the summary timed out.", reason="timeout"),
        lcg.ContextOverflowError("over.", tokens=17_000, limit=16_000, attempts=2),
    ]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error)
        assert str(back).count("Fix:") == 1
        assert vars(back) == vars(error)
    with ProcessPoolExecutor(1) as pool:
        future = pool.submit(_raise, errors[3])
        try:
            future.result()
        except lcg.BudgetExceededError as error:
            assert (error.tokens, error.budget, error.tool) == (20_000, 14_000, "Read")
            assert str(error) == str(errors[3])
        else:
            raise AssertionError("the worker's error did not come back")


def _raise(error: Exception) -> None:
    raise error
