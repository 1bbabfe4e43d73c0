"""Per-tool policies: a truncation cap and never-compress per tool; excluded tools."""

from __future__ import annotations

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_context_guard import (
    MARKER_KEY,
    ConfigError,
    ContextGuard,
    GuardPolicy,
    ToolPolicy,
    compress_old_tool_results,
    truncate_tool_results,
)
from tests.engine._support import ai, assert_paired, call, lines, result


def _kind(message: BaseMessage) -> str | None:
    mark = message.additional_kwargs.get(MARKER_KEY)
    return mark.get("kind") if mark else None


def _history(steps: int, chars: int) -> list[BaseMessage]:
    """Alternating ``bash`` and ``read_file`` calls, each result ``chars`` long."""
    out: list[BaseMessage] = [SystemMessage("agent"), HumanMessage("go")]
    for k in range(steps):
        name = "bash" if k % 2 else "read_file"
        out.append(ai(call(f"c{k}", name, arg=str(k)), id=f"a{k}"))
        out.append(result(f"c{k}", lines(chars // 36)[:chars], id=f"t{k}", name=name))
    return out


def test_a_tool_cap_replaces_the_general_one() -> None:
    history = _history(2, 8_000)
    out = truncate_tool_results(
        history, max_chars=50_000, tool_caps={"read_file": 2_000}
    )
    read, bash = out[3], out[5]
    assert _kind(read) == "truncated" and len(str(read.content)) <= 2_000
    assert bash is history[5]


def test_an_excluded_tool_is_never_cut() -> None:
    history = _history(2, 8_000)
    out = truncate_tool_results(
        history,
        max_chars=1_000,
        head_chars=300,
        tail_chars=300,
        tool_caps={"bash": None},
    )
    assert out[5] is history[5]
    assert _kind(out[3]) == "truncated"


def test_never_compressed_results_stay_whole_and_still_count_in_batches() -> None:
    history = _history(8, 3_000)
    out = compress_old_tool_results(
        history, keep_recent=2, batch=1, keep_whole={"bash"}
    )
    kinds = {m.name: set() for m in history if m.type == "tool"}
    for m in out:
        if m.type == "tool":
            kinds[m.name].add(_kind(m))
    assert kinds["bash"] == {None}
    assert "compressed" in kinds["read_file"]
    # the newest two results (by position, whatever their tool) stay whole
    assert [_kind(m) for m in out[-3:] if m.type == "tool"] == [None, None]


@pytest.mark.parametrize("stable", [False, True], ids=["order-free", "stable"])
def test_the_guard_applies_tool_policies(stable: bool) -> None:
    policy = GuardPolicy(
        context_window=16_000,
        reserve_tokens=1_000,
        stable_prefix=stable,
        max_tool_result_chars=6_000,
        tool_policies={"read_file": ToolPolicy(max_result_chars=1_500)},
        exclude_tools=("bash",),
        compress_trigger=0.0,
    )
    history = _history(6, 3_000)
    sent = ContextGuard(policy).prepare(history).messages
    assert sum(m.type == "tool" for m in sent) == 6
    by_id = {m.id: m for m in sent}
    for k in range(6):
        kept = by_id.get(f"t{k}")
        if kept is None:
            continue
        if kept.name == "bash":
            assert kept is history[3 + 2 * k]
        else:
            assert _kind(kept) in {"truncated", "compressed"}
            assert len(str(kept.content)) <= 1_500


def test_default_policy_is_unchanged_by_names() -> None:
    history = _history(6, 3_000)
    plain = ContextGuard(GuardPolicy(context_window=16_000, stable_prefix=False))
    ruled = ContextGuard(
        GuardPolicy(
            context_window=16_000,
            stable_prefix=False,
            tool_policies={"other": {"never_compress": True}},
        )
    )
    assert plain.prepare(history).messages == ruled.prepare(history).messages


def test_a_bad_tool_policy_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="tool_policies"):
        GuardPolicy(tool_policies={"bash": {"max_result_chars": 0}})
    with pytest.raises(ConfigError, match="tool_policies"):
        GuardPolicy(tool_policies={"bash": {"max_chars": 10}})


def test_a_tool_keep_counts_among_its_own_results() -> None:
    history = _history(8, 3_000)  # read_file at even steps, bash at odd ones
    out = compress_old_tool_results(
        history, keep_recent=1, batch=1, tool_keep={"read_file": 3}
    )
    whole = [m.id for m in out if m.type == "tool" and _kind(m) is None]
    # the three newest reads, and the newest result of all (a bash one)
    assert whole == ["t2", "t4", "t6", "t7"]
    plain = compress_old_tool_results(history, keep_recent=1, batch=1)
    assert [m.id for m in plain if m.type == "tool" and _kind(m) is None] == ["t7"]


def test_a_tool_keep_compresses_in_batches_of_its_own() -> None:
    history = _history(8, 3_000)
    out = compress_old_tool_results(
        history, keep_recent=8, batch=2, tool_keep={"bash": 0}
    )
    kinds = [(m.id, _kind(m)) for m in out if m.type == "tool"]
    bash = [kind for mid, kind in kinds if int(mid[1:]) % 2]
    assert bash == ["compressed"] * 4  # four bash results: two batches of two
    assert all(kind is None for mid, kind in kinds if not int(mid[1:]) % 2)


def test_the_guard_keeps_a_tools_own_newest_results_whole() -> None:
    policy = GuardPolicy(
        context_window=16_000,
        reserve_tokens=1_000,
        stable_prefix=False,
        compress_trigger=0.0,
        compress_batch=1,
        keep_recent_tool_results=1,
        tool_policies={"read_file": ToolPolicy(keep_recent=2)},
    )
    history = _history(6, 1_500)
    sent = ContextGuard(policy).prepare(history).messages
    whole = [m.id for m in sent if m.type == "tool" and _kind(m) is None]
    assert whole == ["t2", "t4", "t5"]


def test_a_tool_keep_below_zero_is_refused() -> None:
    with pytest.raises(ConfigError, match="tool_policies"):
        GuardPolicy(tool_policies={"bash": {"keep_recent": -1}})


def _dropping(window: int, **rule: object) -> GuardPolicy:
    """A policy that trims a long ``_history`` (its results are not compressed)."""
    return GuardPolicy(
        context_window=window,
        reserve_tokens=1_000,
        stable_prefix=False,
        compress_min_chars=100_000,
        tool_policies={"read_file": ToolPolicy(**rule)},  # type: ignore[arg-type]
    )


def test_a_drop_last_tools_calls_outlive_the_others() -> None:
    history = _history(40, 1_500)
    plain = ContextGuard(_dropping(16_000)).prepare(history).messages
    held = ContextGuard(_dropping(16_000, drop_last=True)).prepare(history).messages
    assert_paired(held)
    reads = [m.id for m in history if m.type == "tool" and m.name == "read_file"]
    assert [m.id for m in held if m.id in reads] == reads  # every read kept
    assert sum(m.id in reads for m in plain) < len(reads)  # the plain trim drops some
    assert sum(m.name == "bash" for m in held) < sum(m.name == "bash" for m in plain)


def test_drop_last_calls_go_too_when_nothing_else_is_left() -> None:
    history = _history(60, 3_000)  # the reads alone are over the budget
    sent = ContextGuard(_dropping(16_000, drop_last=True)).prepare(history).messages
    assert_paired(sent)
    reads = [m.id for m in sent if m.type == "tool" and m.name == "read_file"]
    assert 0 < len(reads) < 30 and reads[-1] == "t58"  # the oldest went first
