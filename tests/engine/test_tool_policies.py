"""Per-tool policies: a truncation cap and never-compress per tool; excluded tools.

Keys may be patterns of tool names (``"mcp__github__*"``): an exact name wins,
then the first pattern that matches, in the mapping's order.
"""

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
from langchain_context_guard.engine._tool_policy import policy_for
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


def _eager(**settings: object) -> GuardPolicy:
    """A 16k policy pruning afresh that compresses old results at once."""
    return GuardPolicy(
        context_window=16_000,
        reserve_tokens=1_000,
        stable_prefix=False,
        compress_trigger=0.0,
        **settings,  # type: ignore[arg-type]
    )


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


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"keep_recent": -1}, "keep_recent"),
        ({"max_result_chars": 10}, "max_result_chars"),
        ({"supersede_key": ""}, "supersede_key"),
        ({"drop_last": "sometimes"}, "drop_last"),
    ],
    ids=["keep-below-zero", "cap-too-small", "blank-key", "not-a-bool"],
)
def test_a_bad_tool_policy_value_raises_config_error(
    rule: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError, match=f"ToolPolicy.{field}") as direct:
        ToolPolicy(**rule)  # type: ignore[arg-type]
    assert direct.value.field == field
    with pytest.raises(ConfigError, match=f"ToolPolicy.{field}") as nested:
        GuardPolicy(tool_policies={"bash": rule})
    assert nested.value.field == f"tool_policies.bash.{field}"
    assert "GuardPolicy.tool_policies.bash" in str(nested.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ToolPolicy(keep_recnt=2),
        lambda: GuardPolicy(tool_policies={"bash": {"keep_recnt": 2}}),
        lambda: GuardPolicy.from_dict({"tool_policies": {"bash": {"keep_recnt": 2}}}),
    ],
    ids=["ToolPolicy", "GuardPolicy", "from_dict"],
)
def test_a_misspelt_tool_policy_field_suggests_the_right_one(make: object) -> None:
    with pytest.raises(ConfigError) as raised:
        make()  # type: ignore[operator]
    assert "did you mean 'keep_recent'?" in str(raised.value)
    assert raised.value.field is not None and "keep_recnt" in raised.value.field


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


@pytest.mark.parametrize("key", ["read_file", "read_*", "r?ad_[fg]ile"])
def test_the_guard_keeps_a_tools_own_newest_results_whole(key: str) -> None:
    policy = _eager(
        compress_batch=1,
        keep_recent_tool_results=1,
        tool_policies={key: ToolPolicy(keep_recent=2)},
    )
    history = _history(6, 1_500)
    sent = ContextGuard(policy).prepare(history).messages
    whole = [m.id for m in sent if m.type == "tool" and _kind(m) is None]
    assert whole == ["t2", "t4", "t5"]


def test_a_tool_keep_below_zero_is_refused() -> None:
    with pytest.raises(ConfigError, match="tool_policies"):
        GuardPolicy(tool_policies={"bash": {"keep_recent": -1}})


def _dropping(window: int, key: str = "read_file", **rule: object) -> GuardPolicy:
    """A policy that trims a long ``_history`` (its results are not compressed)."""
    return GuardPolicy(
        context_window=window,
        reserve_tokens=1_000,
        stable_prefix=False,
        compress_min_chars=100_000,
        tool_policies={key: ToolPolicy(**rule)},  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("key", ["read_file", "read_*"])
def test_a_drop_last_tools_calls_outlive_the_others(key: str) -> None:
    history = _history(40, 1_500)
    plain = ContextGuard(_dropping(16_000)).prepare(history).messages
    guard = ContextGuard(_dropping(16_000, key, drop_last=True))
    held = guard.prepare(history).messages
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


GITHUB, SEARCH, SLACK = (
    "mcp__github__get_file",
    "mcp__github__search",
    "mcp__slack__read",
)


def _calls(*names: str, chars: int = 3_000) -> list[BaseMessage]:
    """One call of each tool in ``names``, in order; each result ``chars`` long."""
    out: list[BaseMessage] = [SystemMessage("agent"), HumanMessage("go")]
    for k, name in enumerate(names):
        out.append(ai(call(f"c{k}", name, path=f"f{k}.py"), id=f"a{k}"))
        out.append(result(f"c{k}", lines(chars)[:chars], id=f"t{k}", name=name))
    return out


def _sent(policies: dict[str, ToolPolicy], *names: str) -> dict[str, int]:
    """Characters of each tool's result as a 32k guard sends it (none compressed)."""
    policy = GuardPolicy(context_window=32_000, tool_policies=policies)
    sent = ContextGuard(policy).prepare(_calls(*names)).messages
    return {str(m.name): len(str(m.content)) for m in sent if m.type == "tool"}


def test_a_pattern_caps_the_results_of_every_tool_it_matches() -> None:
    sizes = _sent(
        {"mcp__github__*": ToolPolicy(max_result_chars=1_000)},
        GITHUB,
        SEARCH,
        SLACK,
        "bash",
    )
    assert sizes[GITHUB] <= 1_000 and sizes[SEARCH] <= 1_000
    assert sizes[SLACK] == sizes["bash"] == 3_000  # not matched: the general cap


@pytest.mark.parametrize("exact_first", [True, False], ids=["exact-first", "last"])
def test_an_exact_name_wins_over_a_pattern_wherever_it_is(exact_first: bool) -> None:
    rules = [
        ("mcp__*", ToolPolicy(max_result_chars=1_000)),
        (GITHUB, ToolPolicy(max_result_chars=2_000)),
        (SLACK, ToolPolicy(never_compress=True)),  # not merged with the pattern's
    ]
    sizes = _sent(dict(rules[::-1] if exact_first else rules), GITHUB, SEARCH, SLACK)
    assert 1_000 < sizes[GITHUB] <= 2_000
    assert sizes[SEARCH] <= 1_000
    assert sizes[SLACK] == 3_000


@pytest.mark.parametrize("narrow_first", [True, False], ids=["narrow-first", "wide"])
def test_the_first_matching_pattern_wins(narrow_first: bool) -> None:
    rules = [
        ("mcp__github__*", ToolPolicy(max_result_chars=2_000)),
        ("mcp__*", ToolPolicy(max_result_chars=1_000)),
    ]
    sizes = _sent(dict(rules if narrow_first else rules[::-1]), GITHUB, SLACK)
    assert sizes[SLACK] <= 1_000
    if narrow_first:
        assert 1_000 < sizes[GITHUB] <= 2_000
    else:
        assert sizes[GITHUB] <= 1_000


def test_patterns_match_whole_names_and_case() -> None:
    sizes = _sent(
        {"read_*": ToolPolicy(max_result_chars=1_000)},
        "read_file",
        "Read_file",
        "bulk_read_file",
    )
    assert sizes["read_file"] <= 1_000
    assert sizes["Read_file"] == sizes["bulk_read_file"] == 3_000


def test_an_excluded_pattern_keeps_those_results_whole() -> None:
    policy = _eager(
        max_tool_result_chars=1_000,
        truncate_head_chars=300,
        truncate_tail_chars=300,
        keep_recent_tool_results=0,
        compress_batch=1,
        exclude_tools=("mcp__*",),
    )
    history = _calls(GITHUB, "bash", SLACK, "bash", chars=2_000)
    sent = ContextGuard(policy).prepare(history).messages
    by_id = {m.id: m for m in sent}
    assert by_id["t0"] is history[3] and by_id["t2"] is history[7]
    assert _kind(by_id["t1"]) in {"truncated", "compressed"}
    assert _kind(by_id["t3"]) in {"truncated", "compressed"}


def test_a_patterns_keep_recent_counts_each_matching_tools_own_results() -> None:
    policy = _eager(
        compress_batch=1,
        keep_recent_tool_results=0,
        tool_policies={"read_*": ToolPolicy(keep_recent=1)},
    )
    names = ["read_a", "read_b", "bash"] * 3
    sent = ContextGuard(policy).prepare(_calls(*names, chars=1_500)).messages
    whole = [m.id for m in sent if m.type == "tool" and _kind(m) is None]
    assert whole == ["t6", "t7"]  # the newest read_a and read_b; no bash


def test_a_patterns_supersede_key_points_older_reads_to_newer_ones() -> None:
    policy = _eager(
        tool_policies={"mcp__*": ToolPolicy(supersede_key="path")},
    )
    history = [SystemMessage("agent"), HumanMessage("go")]
    for k in range(2):
        history.append(ai(call(f"c{k}", GITHUB, path="a.py"), id=f"a{k}"))
        history.append(result(f"c{k}", lines(60), id=f"t{k}", name=GITHUB))
    sent = ContextGuard(policy).prepare(history).messages
    assert _kind(sent[3]) == "superseded" and sent[5] is history[5]


def test_a_pattern_that_matches_nothing_changes_nothing() -> None:
    history = _history(6, 3_000)
    plain = GuardPolicy(context_window=16_000, stable_prefix=False)
    ruled = plain.model_copy(
        update={"tool_policies": {"mcp__*": ToolPolicy(never_compress=True)}}
    )
    assert ContextGuard(ruled).prepare(history).messages == (
        ContextGuard(plain).prepare(history).messages
    )


def test_policy_for_resolves_a_name_exact_first_then_patterns_in_order() -> None:
    wide, narrow, exact = (ToolPolicy(keep_recent=n) for n in (1, 2, 3))
    policy = GuardPolicy(
        tool_policies={"mcp__*": wide, "mcp__github__*": narrow, GITHUB: exact}
    )
    assert policy_for(policy, GITHUB) == exact
    assert policy_for(policy, SEARCH) == wide  # the first pattern, not the narrowest
    assert policy_for(policy, "bash") is None


@pytest.mark.parametrize(
    "setting",
    [
        {"tool_policies": {"": {"never_compress": True}}},
        {"tool_policies": {"  ": {"never_compress": True}}},
        {"exclude_tools": ("bash", "")},
        {"exclude_tools": ("\t",)},
    ],
    ids=["empty-key", "blank-key", "empty-exclusion", "blank-exclusion"],
)
def test_a_blank_tool_key_is_refused(setting: dict[str, object]) -> None:
    field = next(iter(setting))
    with pytest.raises(ConfigError, match=f"{field}.*pattern") as caught:
        GuardPolicy(**setting)  # type: ignore[arg-type]
    assert caught.value.field == field


def _read_then_write(write_status: str = "success", path: str = "a.py") -> list:
    """Two ranged reads of a.py, a write of ``path``, then other work."""
    history = [SystemMessage("agent"), HumanMessage("go")]
    reads = [("c0", {"file_path": "a.py"}), ("c1", {"file_path": "a.py", "offset": 40})]
    for call_id, args in reads:
        history.append(ai(call(call_id, "Read", **args), id=f"a-{call_id}"))
        history.append(result(call_id, lines(60), id=f"t-{call_id}", name="Read"))
    history.append(ai(call("w", "Write", file_path=path, content="new"), id="a-w"))
    history.append(result("w", "written", id="t-w", name="Write", status=write_status))
    for k in range(2, 5):
        history.append(ai(call(f"c{k}", "bash", cmd=str(k)), id=f"a{k}"))
        history.append(result(f"c{k}", lines(60), id=f"t{k}", name="bash"))
    return history


_READS_AND_WRITES = {
    "Read": ToolPolicy(supersede_key=("file_path", "offset", "limit")),
    "Write": ToolPolicy(write_key="file_path"),
}


def test_a_write_outdates_every_older_read_of_what_it_wrote() -> None:
    sent = ContextGuard(_eager(tool_policies=_READS_AND_WRITES)).prepare(
        _read_then_write()
    )
    by_id = {m.id: m for m in sent.messages}
    for read in ("t-c0", "t-c1"):  # both ranges of a.py
        assert _kind(by_id[read]) == "superseded"
        assert "tool call w holds the fresh result" in by_id[read].content
    assert_paired(sent.messages)


@pytest.mark.parametrize(
    ("status", "path"),
    [("error", "a.py"), ("success", "b.py")],
    ids=["failed", "other"],
)
def test_a_failed_write_or_one_of_another_path_outdates_nothing(status, path) -> None:
    sent = ContextGuard(_eager(tool_policies=_READS_AND_WRITES)).prepare(
        _read_then_write(status, path)
    )
    kinds = {m.id: _kind(m) for m in sent.messages}
    assert "superseded" not in (kinds["t-c0"], kinds["t-c1"])


def test_a_read_after_the_write_is_current_and_the_older_pointer_stays() -> None:
    history = _read_then_write()
    history.append(ai(call("c9", "Read", file_path="a.py"), id="a-c9"))
    history.append(result("c9", lines(60), id="t-c9", name="Read"))
    sent = ContextGuard(_eager(tool_policies=_READS_AND_WRITES)).prepare(history)
    by_id = {m.id: m for m in sent.messages}
    assert "tool call w holds" in by_id["t-c0"].content  # never moves
    assert by_id["t-c9"] is history[-1]


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"write_key": " "}, "write_key"),
        ({"write_key": "file_path", "supersede_key": "file_path"}, "write_key"),
    ],
    ids=["blank", "both"],
)
def test_a_bad_write_key_is_refused_with_the_fix(rule, field) -> None:
    with pytest.raises(ConfigError) as info:
        ToolPolicy(**rule)
    assert info.value.field == field and info.value.hint
