"""Tests for replay._transcripts (offline; shared data optional)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    messages_to_dict,
)

from langchain_context_guard import is_app_message
from langchain_context_guard.engine._messages import holds_reply
from langchain_context_guard.replay._transcripts import (
    TRAJECTORIES_ENV_VAR,
    TranscriptError,
    load_paths,
    load_trajectories,
    load_transcript,
    provider_prompt_tokens,
    shared_trajectory_dir,
    trajectory_to_messages,
)

SHARED = shared_trajectory_dir()
TRAJ_FILES = sorted(SHARED.glob("*.traj.json")) if SHARED else []
NO_DATA = pytest.mark.skipif(not TRAJ_FILES, reason="shared trajectories not found")
TRAJ_PARAMS = [
    pytest.param(p, id=p.name.removesuffix(".traj.json")) for p in TRAJ_FILES
] or [pytest.param(None, id="no-shared-data", marks=NO_DATA)]
FORMAT_ERROR = "Please always provide EXACTLY ONE action"


def _usage(prompt: int, completion: int, reasoning: int | None = 7) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def _assistant(text: str, **usage: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "extra": {"response": {"usage": _usage(**usage)}},
    }


def _tiny_traj() -> dict[str, Any]:
    """System, task, one action, a two-block reply, a no-block reply."""
    return {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "You are a shell agent."},
            {"role": "user", "content": "Fix the bug."},
            _assistant(
                "THOUGHT: look\n\n```bash\nls -la\n```", prompt=100, completion=9
            ),
            {
                "role": "user",
                "content": "<returncode>0</returncode>\n<output>a</output>",
            },
            _assistant(
                "```bash\nls\n```\nor\n```bash\npwd\n```",
                prompt=140,
                completion=12,
                reasoning=None,
            ),
            {"role": "user", "content": FORMAT_ERROR + ", found 2 actions."},
            _assistant("THOUGHT: no command", prompt=170, completion=4),
            {"role": "user", "content": FORMAT_ERROR + ", found 0 actions."},
        ],
    }


# --- trajectory_to_messages on synthetic data ---------------------------------


def test_tiny_trajectory_types_ids_and_pairing() -> None:
    msgs = trajectory_to_messages(_tiny_traj())
    kinds = [type(m) for m in msgs]
    assert kinds == [
        SystemMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
    ]
    assert [m.id for m in msgs] == [f"m{k}" for k in range(8)]
    ai = msgs[2]
    assert isinstance(ai, AIMessage)
    assert str(ai.content).startswith("THOUGHT: look")
    assert ai.tool_calls == [
        {
            "name": "bash",
            "args": {"command": "ls -la"},
            "id": "call_2",
            "type": "tool_call",
        }
    ]
    tool = msgs[3]
    assert isinstance(tool, ToolMessage)
    assert (tool.tool_call_id, tool.name) == ("call_2", "bash")
    two_blocks = msgs[4]
    assert isinstance(two_blocks, AIMessage) and two_blocks.tool_calls == []
    # The harness's format errors are its own messages, the task a person's.
    assert [is_app_message(m) for m in msgs] == [False] * 5 + [True, False, True]
    assert not holds_reply(msgs)


def test_tiny_trajectory_usage_metadata() -> None:
    msgs = trajectory_to_messages(_tiny_traj())
    first, second = msgs[2], msgs[4]
    assert isinstance(first, AIMessage) and isinstance(second, AIMessage)
    assert first.usage_metadata == {
        "input_tokens": 100,
        "output_tokens": 9,
        "total_tokens": 109,
        "output_token_details": {"reasoning": 7},
        "input_token_details": {"cache_read": 3},
    }
    assert second.usage_metadata is not None
    assert second.usage_metadata.get("output_token_details") == {}  # none reported
    assert first.response_metadata == {"prompt_tokens": 100}
    assert provider_prompt_tokens(msgs) == [(2, 100), (4, 140), (6, 170)]


def test_assistant_without_usage_has_no_metadata() -> None:
    data = {"messages": [{"role": "assistant", "content": "```bash\nls\n```"}]}
    (ai,) = trajectory_to_messages(data)
    assert isinstance(ai, AIMessage)
    assert ai.usage_metadata is None and provider_prompt_tokens([ai]) == []
    assert ai.tool_calls[0]["id"] == "call_0"


@settings(max_examples=50, deadline=None, database=None)
@given(
    st.text(
        st.characters(codec="utf-8", exclude_characters="`\r"),
        min_size=1,
    ).filter(lambda s: s.strip() == s)
)
def test_bash_command_extracted_verbatim(command: str) -> None:
    data = {
        "messages": [_assistant(f"T\n```bash\n{command}\n```", prompt=1, completion=1)]
    }
    (ai,) = trajectory_to_messages(data)
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls[0]["args"] == {"command": command}


# --- the shared SWE trajectories ----------------------------------------------


@pytest.mark.parametrize("path", TRAJ_PARAMS)
def test_shared_trajectory_converts(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    raw = data["messages"]
    msgs = trajectory_to_messages(data)
    assert len(msgs) == len(raw)
    assert len({m.id for m in msgs}) == len(msgs)
    for k, (msg, src) in enumerate(zip(msgs, raw, strict=True)):
        assert msg.content == src["content"]
        if isinstance(msg, AIMessage):
            assert src["role"] == "assistant"
            assert msg.usage_metadata is not None
            prompt = src["extra"]["response"]["usage"]["prompt_tokens"]
            assert msg.usage_metadata["input_tokens"] == prompt
            assert msg.response_metadata["prompt_tokens"] == prompt
            nxt = msgs[k + 1]
            if msg.tool_calls:
                assert len(msg.tool_calls) == 1
                assert isinstance(nxt, ToolMessage)
                assert nxt.tool_call_id == msg.tool_calls[0]["id"]
            else:  # mini-swe-agent answered with a format error: its own
                assert type(nxt) is HumanMessage
                assert str(nxt.content).startswith(FORMAT_ERROR)
                assert is_app_message(nxt)
        elif isinstance(msg, ToolMessage):
            prev = msgs[k - 1]
            assert isinstance(prev, AIMessage) and prev.tool_calls
    n_ai = sum(isinstance(m, AIMessage) for m in msgs)
    assert len(provider_prompt_tokens(msgs)) == n_ai
    assert load_transcript(path) == msgs
    assert not holds_reply(msgs)  # no person replies in a task run


@NO_DATA
def test_load_trajectories_sorted_and_complete() -> None:
    assert SHARED is not None
    loaded = load_trajectories(SHARED)
    assert list(loaded) == [p.name.removesuffix(".traj.json") for p in TRAJ_FILES]
    assert list(loaded) == sorted(loaded)


def test_load_trajectories_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="not a directory"):
        load_trajectories(tmp_path / "nope")


def test_shared_trajectory_dir_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRAJECTORIES_ENV_VAR, str(tmp_path))
    assert shared_trajectory_dir() == tmp_path
    monkeypatch.setenv(TRAJECTORIES_ENV_VAR, str(tmp_path / "missing"))
    assert shared_trajectory_dir() is None


# --- loader formats round-trip ------------------------------------------------


def _sample() -> list[BaseMessage]:
    return trajectory_to_messages(_tiny_traj())


def _shape(msgs: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """The parts every format preserves: type, content, tool calls and answers."""
    out: list[tuple[Any, ...]] = []
    for m in msgs:
        calls = [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])]
        out.append((m.type, m.content, calls, getattr(m, "tool_call_id", None)))
    return out


def _openai(msgs: list[BaseMessage]) -> list[dict[str, Any]]:
    return list(convert_to_openai_messages(msgs))


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


Writer = Callable[[list[BaseMessage]], str]
WRITERS: dict[str, tuple[str, Writer, bool]] = {
    # id: (file name, serialiser, whether ids/usage survive exactly)
    "openai-list": ("t.json", lambda m: json.dumps(_openai(m), indent=2), False),
    "openai-object": ("t.json", lambda m: json.dumps({"messages": _openai(m)}), False),
    "openai-jsonl": ("t.jsonl", lambda m: _jsonl(_openai(m)), False),
    "openai-jsonl-as-json": ("t.json", lambda m: _jsonl(_openai(m)), False),
    "langchain-dicts": ("t.json", lambda m: json.dumps(messages_to_dict(m)), True),
    "langchain-jsonl": ("t.jsonl", lambda m: _jsonl(messages_to_dict(m)), True),
    "traj-json": ("t.traj.json", lambda m: json.dumps(_tiny_traj()), True),
}


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_loader_round_trip(fmt: str, tmp_path: Path) -> None:
    name, write, exact = WRITERS[fmt]
    original = _sample()
    path = tmp_path / name
    path.write_text(write(original), encoding="utf-8")
    loaded = load_transcript(path)
    assert _shape(loaded) == _shape(original)
    if exact:
        assert loaded == original


def test_single_message_object(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"role": "user", "content": "hi"}), encoding="utf-8")
    assert load_transcript(str(path)) == [HumanMessage("hi")]


@settings(max_examples=30, deadline=None, database=None)
@given(st.lists(st.text(), min_size=1, max_size=5))
def test_jsonl_round_trip_any_text(texts: list[str]) -> None:
    rows = [{"role": "user", "content": t} for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.jsonl"
        path.write_text(_jsonl(rows), encoding="utf-8")
        assert [m.content for m in load_transcript(path)] == texts


# --- bad input ----------------------------------------------------------------

USER = json.dumps({"role": "user", "content": "hi"})
BAD_CASES: dict[str, tuple[str, str | bytes, list[str]]] = {
    # id: (file name, file content, fragments the error message must contain)
    "jsonl-bad-json": (
        "transcript.jsonl",
        f'{USER}\n{USER}\n{{"role": "user" "content": "x"}}\n',
        ["transcript.jsonl line 3", "invalid JSON", "Expecting ','", "per line"],
    ),
    "json-bad-json": (
        "transcript.json",
        '[\n  {"role": "user",\n   "content": "a"},\n  {"role": }\n]\n',
        ["transcript.json line 4", "invalid JSON"],
    ),
    "jsonl-unknown-role": (
        "t.jsonl",
        f'{USER}\n\n{{"role": "wizard", "content": "x"}}\n',
        ["t.jsonl line 3", "unknown role 'wizard'", "expected one of"],
    ),
    "jsonl-not-an-object": (
        "t.jsonl",
        f"{USER}\n[1, 2]\n",
        ["t.jsonl line 2", "expected a message object, got list"],
    ),
    "jsonl-tool-without-call-id": (
        "t.jsonl",
        f'{USER}\n{{"role": "tool", "content": "out"}}\n',
        ["t.jsonl line 2", "invalid tool message", "tool_call_id"],
    ),
    "jsonl-missing-content": (
        "t.jsonl",
        '{"role": "user"}\n',
        ["t.jsonl line 1", "missing 'content'"],
    ),
    "jsonl-missing-role": (
        "t.jsonl",
        '{"content": "x"}\n',
        ["t.jsonl line 1", "missing 'role'"],
    ),
    "json-list-unknown-role": (
        "t.json",
        f'[{USER}, {{"role": "robot", "content": "x"}}]',
        ["t.json message 1", "unknown role 'robot'"],
    ),
    "langchain-unknown-type": (
        "t.json",
        '[{"type": "wizard", "data": {"content": "x"}}]',
        ["t.json message 0", "unknown type 'wizard'"],
    ),
    "openai-tool-calls-not-objects": (
        "t.json",
        f'[{USER}, {{"role": "assistant", "content": "", "tool_calls": ["c1"]}}]',
        ["t.json message 1", "'tool_calls' must be a list of objects", "['c1']"],
    ),
    "openai-tool-calls-not-a-list": (
        "t.jsonl",
        f'{USER}\n{{"role": "assistant", "content": "", "tool_calls": "c1"}}\n',
        ["t.jsonl line 2", "'tool_calls' must be a list of objects"],
    ),
    "langchain-tool-calls-not-objects": (
        "t.json",
        '[{"type": "ai", "data": {"content": "", "tool_calls": [3]}}]',
        ["t.json message 0", "'tool_calls' must be a list of objects"],
    ),
    "json-wrong-top-level": ("t.json", "42", ["t.json", "expected a list"]),
    "json-empty-list": ("t.json", "[]", ["t.json", "no messages"]),
    "traj-unknown-role": (
        "x.traj.json",
        json.dumps({"info": {}, "messages": [{"role": "tool", "content": "x"}]}),
        ["x.traj.json message 0", "unknown role 'tool'"],
    ),
    "empty-file": ("empty.jsonl", "", ["empty.jsonl", "empty file"]),
    "blank-file": ("blank.json", "\n  \n", ["blank.json", "empty file"]),
    "not-utf8": ("bin.json", b"\xff\xfe[]", ["bin.json", "not UTF-8"]),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_names_file_and_line(case: str, tmp_path: Path) -> None:
    name, content, fragments = BAD_CASES[case]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_path(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "gone.json"
    if kind == "directory":
        path.mkdir()
    with pytest.raises(TranscriptError, match=r"gone\.json: cannot read file"):
        load_transcript(path)


def test_transcript_error_is_value_error() -> None:
    assert issubclass(TranscriptError, ValueError)


def test_shared_trajectories_are_found_beside_the_repository(monkeypatch):
    monkeypatch.delenv("CONTEXT_GUARD_TRAJECTORIES", raising=False)
    beside = Path(__file__).resolve().parents[3] / "shared/data/swe-trajectories"
    expected = beside.resolve() if beside.is_dir() else None
    found = shared_trajectory_dir()
    assert (found.resolve() if found else None) == expected


def test_a_directory_of_message_dumps_loads_each_but_its_index(tmp_path: Path) -> None:
    """The shared multi-tool corpus: ``{"id", "family", "messages"}`` per file."""
    runs = {
        "cc-1": [HumanMessage("read it"), AIMessage("done")],
        "oh-2": [HumanMessage("fix it"), AIMessage("fixed")],
    }
    for name, messages in runs.items():
        dump = {"id": name, "family": name[:2], "messages": messages_to_dict(messages)}
        (tmp_path / f"{name}.json").write_text(json.dumps(dump), encoding="utf-8")
    (tmp_path / "index.json").write_text(json.dumps(list(runs)), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    loaded = load_paths([tmp_path])
    assert list(loaded) == ["cc-1", "oh-2"]
    assert [m.content for m in loaded["oh-2"]] == ["fix it", "fixed"]
