"""Superseded reads: an older result of a call made again becomes a pointer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_context_guard import (
    MARKER_KEY,
    ContextGuard,
    GuardPolicy,
    ToolPolicy,
    compress_old_tool_results,
)
from tests.engine._support import ai, assert_paired, call, lines, result

READS = {"read_file": "path"}


def _mark(message: BaseMessage) -> dict[str, Any]:
    return dict(message.additional_kwargs.get(MARKER_KEY) or {})


def _history(*steps: tuple[str, str], chars: int = 2_000) -> list[BaseMessage]:
    """One call per step, as (tool, its argument); each result ``chars`` long."""
    out: list[BaseMessage] = [SystemMessage("agent"), HumanMessage("go")]
    for k, (name, arg) in enumerate(steps):
        args = {"path": arg} if name == "read_file" else {"command": arg}
        out.append(ai(call(f"c{k}", name, **args), id=f"a{k}"))
        body = lines(chars // 36, prefix=f"v{k}")[:chars]
        out.append(result(f"c{k}", body, id=f"t{k}", name=name))
    return out


def test_an_older_read_points_to_the_next_one() -> None:
    history = _history(
        ("read_file", "a.py"), ("read_file", "b.py"), ("read_file", "a.py")
    )
    out = compress_old_tool_results(history, keep_recent=9, supersede=READS)
    old, other, new = out[3], out[5], out[7]
    mark = _mark(old)
    assert mark["kind"] == "superseded" and mark["newer"] == "c2"
    assert mark["original_chars"] == len(str(history[3].content))
    assert "c2" in str(old.content) and len(str(old.content)) < 300
    assert old.tool_call_id == "c0"  # still answers its call
    assert other is history[5] and new is history[7]  # the newest read stays
    assert history[3].additional_kwargs == {}  # the input is not changed


def test_a_chain_of_reads_points_each_to_the_next() -> None:
    history = _history(*[("read_file", "a.py")] * 3)
    out = compress_old_tool_results(history, keep_recent=9, supersede=READS)
    assert [_mark(m).get("newer") for m in out if m.type == "tool"] == [
        "c1",
        "c2",
        None,
    ]


def test_other_arguments_and_other_tools_are_not_superseded() -> None:
    history = _history(("read_file", "a.py"), ("bash", "a.py"), ("read_file", "b.py"))
    out = compress_old_tool_results(history, keep_recent=9, supersede=READS)
    assert out == history


def test_a_superseded_result_does_not_count_among_the_newest() -> None:
    history = _history(("bash", "ls"), ("read_file", "a.py"), ("read_file", "a.py"))
    plain = compress_old_tool_results(history, keep_recent=2, batch=1)
    assert _mark(plain[3])["kind"] == "compressed"
    out = compress_old_tool_results(history, keep_recent=2, batch=1, supersede=READS)
    assert out[3] is history[3]  # the read it made room for keeps it whole
    assert _mark(out[5])["kind"] == "superseded"


def test_a_tool_kept_whole_is_never_superseded() -> None:
    history = _history(("read_file", "a.py"), ("read_file", "a.py"))
    out = compress_old_tool_results(
        history, keep_recent=9, supersede=READS, keep_whole={"read_file"}
    )
    assert out == history


def _policy(**kwargs: Any) -> GuardPolicy:
    return GuardPolicy(
        context_window=16_000,
        reserve_tokens=1_000,
        stable_prefix=False,
        tool_policies={"read_file": ToolPolicy(supersede_key="path")},
        **kwargs,
    )


def test_the_guard_supersedes_only_when_it_compresses() -> None:
    history = _history(("read_file", "a.py"), ("read_file", "a.py"), chars=1_000)
    quiet = ContextGuard(_policy()).prepare(history).messages
    assert quiet == history  # within compress_trigger: sent whole
    sent = ContextGuard(_policy(compress_trigger=0.0)).prepare(history).messages
    assert _mark(sent[3])["kind"] == "superseded"
    assert_paired(sent)


def test_an_open_call_supersedes_nothing_until_its_result_comes() -> None:
    history = _history(("read_file", "a.py"), chars=1_000)
    history.append(ai(call("c9", "read_file", path="a.py"), id="a9"))
    guard = ContextGuard(_policy(compress_trigger=0.0))
    sent = guard.prepare(history).messages
    assert "kind" not in _mark(sent[3])  # the open call's stand-in read nothing
    history.append(result("c9", "fresh", id="t9", name="read_file"))
    sent = guard.prepare(history).messages
    assert _mark(sent[3])["newer"] == "c9"
    assert_paired(sent)


def test_a_prepared_output_prepares_to_itself() -> None:
    steps = [("read_file", "a.py"), ("bash", "make"), ("read_file", "a.py")] * 3
    history = _history(*steps, chars=3_000)
    guard = ContextGuard(_policy())
    sent = guard.prepare(history).messages
    assert any(_mark(m).get("kind") == "superseded" for m in sent)
    assert ContextGuard(_policy()).prepare(sent).messages == sent


def _reads(*ranges: dict[str, Any], failed: tuple[int, ...] = ()) -> list[BaseMessage]:
    """``Read`` calls with these arguments; the calls at ``failed`` fail."""
    out: list[BaseMessage] = [SystemMessage("agent"), HumanMessage("go")]
    for k, args in enumerate(ranges):
        out.append(ai(call(f"c{k}", "Read", **args), id=f"a{k}"))
        if k in failed:
            out.append(result(f"c{k}", "Error: timed out", status="error", name="Read"))
        else:
            body = lines(60, prefix=f"v{k}")
            out.append(result(f"c{k}", body, id=f"t{k}", name="Read"))
    return out


RANGED = {"Read": ("file_path", "offset", "limit")}


def test_several_key_arguments_supersede_only_the_same_range() -> None:
    history = _reads(
        {"file_path": "a.py"},
        {"file_path": "a.py", "offset": 100, "limit": 50},
        {"file_path": "a.py", "offset": 100, "limit": 50},
        {"file_path": "a.py"},
    )
    out = compress_old_tool_results(history, keep_recent=9, supersede=RANGED)
    assert [_mark(m).get("newer") for m in out if m.type == "tool"] == [
        "c3",  # the whole file, read again whole
        "c2",  # the same range read again
        None,
        None,
    ]
    by_path = compress_old_tool_results(
        history, keep_recent=9, supersede={"Read": "file_path"}
    )
    assert [_mark(m).get("newer") for m in by_path if m.type == "tool"] == [
        "c1",
        "c2",
        "c3",
        None,
    ]


def test_a_read_without_the_first_key_argument_reads_nothing() -> None:
    history = _reads({"offset": 1}, {"offset": 1})
    assert compress_old_tool_results(history, keep_recent=9, supersede=RANGED) == (
        history
    )


@pytest.mark.parametrize("key", ["file_path", ("file_path", "offset", "limit")])
def test_a_failed_read_never_supersedes_a_good_one(key: Any) -> None:
    history = _reads({"file_path": "a.py"}, {"file_path": "a.py"}, failed=(1,))
    out = compress_old_tool_results(history, keep_recent=9, supersede={"Read": key})
    assert out == history  # the only good read stays whole


def test_a_good_read_after_a_failed_one_supersedes_the_older_good_one() -> None:
    history = _reads(*[{"file_path": "a.py"}] * 3, failed=(1,))
    out = compress_old_tool_results(history, keep_recent=9, supersede=RANGED)
    assert [_mark(m).get("newer") for m in out if m.type == "tool"] == [
        "c2",
        None,
        None,
    ]


@pytest.mark.parametrize("archived", [False, True], ids=["plain", "archived"])
def test_an_archived_guard_points_back_to_the_superseded_read(archived: bool) -> None:
    history = _history(("read_file", "a.py"), ("read_file", "a.py"), chars=1_000)
    policy = _policy(compress_trigger=0.0, archived_results=archived)
    sent = ContextGuard(policy).prepare(history).messages
    old = str(sent[3].content)
    assert _mark(sent[3])["kind"] == "superseded" and "c1" in old
    assert ('full text: read_tool_result("#1")' in old) is archived  # c0's key
    assert_paired(sent)
