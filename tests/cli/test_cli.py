from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import types
from pathlib import Path

import pytest

from langchain_context_guard import GuardPolicy
from langchain_context_guard.cli._main import main
from langchain_context_guard.cli._options import load_policy
from langchain_context_guard.replay._transcripts import shared_trajectory_dir
from tests.cli._support import checkpoint_db, openai_history, run, write_json


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("demo", "inspect", "replay"):
        assert command in out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 2
    assert "usage: context-guard" in out


def test_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "inspect", "x.json", "--bogus")
    assert code == 2
    assert "unrecognized arguments: --bogus" in err


def test_inspect_text_shows_every_fate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "chat.json", openai_history(200, 3_000))
    code, out, err = run(
        capsys, "inspect", path, "--window", 24_000, "--reserve", 2_000
    )
    assert (code, err) == (0, "")
    assert out.startswith("chat.json: 403 messages\n")
    assert "window 24,000 tokens (from override), reserve 2,000, budget 22,000" in out
    for fate in ("kept", "compressed", "trimmed"):
        assert f"  {fate}\n" in out
    assert "(within budget 22,000)" in out
    assert "\n  compress: changed" in out
    assert "\nusage, history: " in out
    assert re.search(r"\nusage, sent: [\d,]+ tokens \(\d+% of 24,000\): system", out)


def test_inspect_json_is_machine_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "chat.json", openai_history(120, 3_000))
    code, out, _ = run(capsys, "inspect", path, "--window", 24_000, "--json")
    assert code == 0
    doc = json.loads(out)
    history = [r for r in doc["rows"] if r["index"] is not None]
    assert doc["messages"] == len(history) == 243
    added = [r["fate"] for r in doc["rows"] if r["index"] is None]
    assert added == []  # no digest by default (GuardPolicy.digest)
    assert doc["within_budget"] is True
    assert doc["report"]["tokens_after"] <= doc["report"]["budget"]
    sent = sum(r["tokens_sent"] for r in doc["rows"])
    assert 0 < sent <= doc["report"]["budget"]
    kept = [r for r in doc["rows"] if r["fate"] != "trimmed"]
    assert len(kept) == doc["messages_sent"]
    usage = doc["usage"]
    assert usage["sent"]["total"] == sent
    assert usage["history"]["total"] == sum(r["tokens"] for r in history)
    assert usage["sent"]["tool_results"] < usage["history"]["tool_results"]


def test_inspect_reads_jsonl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in openai_history(4)) + "\n")
    code, out, _ = run(capsys, "inspect", path)
    assert code == 0
    assert "chat.jsonl: 11 messages" in out
    assert "from default" in out


def test_inspect_window_from_model_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "chat.json", openai_history(2))
    code, out, err = run(capsys, "inspect", path, "--model", "gpt-4o", "--json")
    assert code == 0
    report = json.loads(out)["report"]
    assert (report["context_window"], report["window_source"]) == (128_000, "table")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("encoder", "model", "counter"),
    [
        ("", "claude-sonnet-4", "bpe-openai:cl100k_base"),
        ("", "gpt-4o", "bpe-openai:o200k_base"),
        ("tiktoken", "claude-sonnet-4", "tiktoken:cl100k_base"),
        ("tiktoken", "gpt-4o", "tiktoken:o200k_base"),
    ],
)
def test_inspect_names_the_encoder_that_counted(
    encoder: str,
    model: str,
    counter: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
    path = write_json(tmp_path / "chat.json", openai_history(3))
    code, out, _ = run(capsys, "inspect", path, "--model", model)
    assert code == 0 and f"; counter {counter}\n" in out
    code, out, _ = run(capsys, "inspect", path, "--model", model, "--json")
    assert code == 0 and json.loads(out)["report"]["counter"] == counter


def test_warnings_become_one_line_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from langchain_context_guard.cli import _inspect as _cli_inspect

    real = _cli_inspect.analyse

    def noisy(*args: object, **kwargs: object) -> object:
        warnings.warn("tokenizer fell back", UserWarning, stacklevel=1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_cli_inspect, "analyse", noisy)
    path = write_json(tmp_path / "chat.json", openai_history(2))
    code, _, err = run(capsys, "inspect", path)
    assert code == 0
    assert one_line(err) == "context-guard: note: tokenizer fell back"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "bad.json",
            '[\n {"role": "user", "content": "hi"},\n oops\n]',
            "bad.json line 3",
        ),
        (
            "bad.jsonl",
            '{"role": "user", "content": "a"}\n{"role": \n',
            "bad.jsonl line 2",
        ),
        ("role.json", '[{"role": "wizard", "content": "x"}]', "unknown role 'wizard'"),
        ("empty.json", "", "empty file"),
    ],
    ids=["json-line", "jsonl-line", "bad-role", "empty"],
)
def test_inspect_bad_transcript_exits_2_naming_the_place(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    expected: str,
) -> None:
    (tmp_path / name).write_text(text)
    code, out, err = run(capsys, "inspect", tmp_path / name)
    assert (code, out) == (2, "")
    line = one_line(err)
    assert line.startswith("context-guard: error: ")
    assert expected in line


def test_inspect_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "inspect", tmp_path / "nope.json")
    assert code == 2
    assert "nope.json: no such file" in one_line(err)


def test_inspect_too_small_window_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "chat.json", openai_history(2))
    code, _, err = run(capsys, "inspect", path, "--window", 8_000, "--reserve", 1_000)
    assert code == 2
    assert "below the minimum of 16,000 tokens" in one_line(err)


def test_config_yaml_syntax_error_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_json(tmp_path / "chat.json", openai_history(2))
    config = tmp_path / "guard.yaml"
    config.write_text("context_window: 32000\nreserve_tokens: [1,\n")
    code, _, err = run(capsys, "inspect", chat, "--config", config)
    assert code == 2
    line = one_line(err)
    assert f"{config} line 3: invalid YAML" in line


def test_config_bad_value_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_json(tmp_path / "chat.json", openai_history(2))
    config = tmp_path / "guard.yaml"
    config.write_text(
        "agent:\n  contextGuard:\n    context_window: 32000\n    reserveTokens: -5\n"
    )
    code, _, err = run(capsys, "inspect", chat, "--config", config)
    assert code == 2
    line = one_line(err)
    assert line.startswith(
        f"context-guard: error: --config {config} line 4: GuardPolicy."
    )
    assert "reserve" in line


def test_config_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_json(tmp_path / "chat.json", openai_history(2))
    missing = tmp_path / "missing.yaml"
    code, _, err = run(capsys, "inspect", chat, "--config", missing)
    assert code == 2
    assert f"--config {missing}: cannot read (No such file" in one_line(err)


def test_bad_environment_variable_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXT_GUARD_RESERVE_TOKENS", "lots")
    chat = write_json(tmp_path / "chat.json", openai_history(2))
    code, _, err = run(capsys, "inspect", chat)
    assert code == 2
    assert "Environment variable CONTEXT_GUARD_RESERVE_TOKENS='lots'" in one_line(err)


def test_flags_win_over_environment_over_file(tmp_path: Path) -> None:
    config = tmp_path / "guard.yaml"
    config.write_text("context_window: 64000\nkeep_recent_tool_results: 3\n")
    env = {
        "CONTEXT_GUARD_CONTEXT_WINDOW": "48000",
        "CONTEXT_GUARD_RESERVE_TOKENS": "1000",
        "CONTEXT_GUARD_KEEP_RECENT_TOOL_RESULTS": "9",
    }
    policy = load_policy(
        config=config,
        flags={"keep_recent_tool_results": 2, "reserve_tokens": None},
        defaults={"context_window": 32_000, "compress_batch": 4},
        environ=env,
    )
    assert policy == GuardPolicy(
        context_window=48_000,  # the environment over the file over the defaults
        reserve_tokens=1_000,
        keep_recent_tool_results=2,
        compress_batch=4,
    )


def test_inspect_checkpoint_db_lists_threads_then_shows_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = checkpoint_db(tmp_path / "agent.sqlite")
    code, out, _ = run(capsys, "inspect", db)
    assert code == 0
    assert out.startswith(
        "agent.sqlite: 1 thread(s); pick one with --thread ID\n  t-1  ("
    )
    code, out, _ = run(capsys, "inspect", db, "--thread", "t-1", "--window", 16_000)
    assert code == 0
    assert "agent.sqlite thread t-1: 26 messages" in out
    assert "synthetic synthetic_result" in out  # the unanswered last call
    assert "(within budget" in out
    code, out, _ = run(capsys, "inspect", db, "--json")
    assert json.loads(out)["threads"][0]["thread_id"] == "t-1"


def test_inspect_unknown_thread_names_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = checkpoint_db(tmp_path / "agent.sqlite", turns=2)
    code, _, err = run(capsys, "inspect", db, "--thread", "t-9")
    assert code == 2
    assert "no thread 't-9'; threads in this file: t-1" in one_line(err)


def test_inspect_sqlite_without_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    code, _, err = run(capsys, "inspect", db)
    assert code == 2
    assert "other.db: not a LangGraph SQLite checkpoint database" in one_line(err)


def test_thread_flag_needs_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_json(tmp_path / "chat.json", openai_history(2))
    code, _, err = run(capsys, "inspect", chat, "--thread", "x")
    assert code == 2
    assert "--thread needs a LangGraph SQLite checkpoint database" in one_line(err)


def test_inspect_shared_trajectory(capsys: pytest.CaptureFixture[str]) -> None:
    data = shared_trajectory_dir()
    if data is None:
        pytest.skip("shared trajectories are not available")
    path = data / "sympy__sympy-19040.traj.json"
    code, out, _ = run(capsys, "inspect", path, "--window", 32_000, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["messages"] == 266
    assert doc["within_budget"] is True
    fates = {r["fate"] for r in doc["rows"]}
    assert {"kept", "trimmed", "compressed"} <= fates
    assert doc["rows"][1]["fate"] == "kept"  # the task survives trimming


def test_replay_is_dispatched_with_its_arguments(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("langchain_context_guard.cli._replay")

    def main_replay(argv: list[str] | None) -> int:
        seen.append(list(argv or []))
        return 7

    fake.main_replay = main_replay  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain_context_guard.cli._replay", fake)
    assert main(["replay", "--window", "16000", "a.json"]) == 7
    assert seen == [["--window", "16000", "a.json"]]


def test_replay_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_context_guard.replay._transcripts import TranscriptError

    fake = types.ModuleType("langchain_context_guard.cli._replay")

    def main_replay(argv: list[str] | None) -> int:
        raise TranscriptError("x.json line 4: invalid JSON")

    fake.main_replay = main_replay  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain_context_guard.cli._replay", fake)
    code, _, err = run(capsys, "replay", "x.json")
    assert code == 2
    assert one_line(err) == "context-guard: error: x.json line 4: invalid JSON"


def test_replay_runs_for_real(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "replay", "--help")
    assert code == 0
    assert "context-guard replay" in out
    chat = write_json(tmp_path / "chat.json", openai_history(12))
    args = ("replay", chat, "-w", "16k", "-s", "none", "-s", "guard", "--no-plot", "-q")
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "| 16k | guard | 0 |" in out
    (tmp_path / "bad.json").write_text("[\n oops\n]")
    code, _, err = run(capsys, "replay", tmp_path / "bad.json", "--no-plot", "-q")
    assert code == 2
    assert "bad.json line 2" in one_line(err)


def test_replay_times_calls_and_splits_the_transcripts_in_halves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [write_json(tmp_path / f"{n}.json", openai_history(6)) for n in "abc"]
    args = ("replay", *files, "-w", "16k", "-s", "none", "--no-plot", "-q")
    timed = ("--cache-ttl", "5m", "--gap-model", "pauses:1:10m", "--halves")
    code, out, _ = run(capsys, *args, *timed)
    assert code == 0
    assert "calls timed by pauses:1:600:" in out
    assert "first 1 transcripts (a .. a)" in out
    assert "last 2 transcripts (b .. c)" in out
    assert out.count("| 16k | none |") == 3


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "langchain_context_guard",
            "inspect",
            str(tmp_path / "x.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"context-guard: error: {tmp_path / 'x.json'}: no such file"
    )


def test_demo_without_its_extras_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)
    code, _, err = run(capsys, "demo", "--db", tmp_path / "d.sqlite")
    assert code == 2
    assert "pip install 'langchain-context-guard[offline,agents,sqlite]'" in one_line(
        err
    )


def test_replay_help_explains_every_strategy_and_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from langchain_context_guard.replay import STRATEGIES, ReplayResult, format_table

    assert main(["replay", "--help"]) == 0
    out = capsys.readouterr().out
    empty = ReplayResult([], {}, {}, usage_feedback=True)
    header = format_table(empty).splitlines()[0]
    columns = [c.strip() for c in header.strip("|").split("|")]
    for name in [*STRATEGIES, *columns]:
        term = name.split(" med")[0].split(" out")[0]  # "counter err med/p90"
        assert term in out, term


@pytest.mark.parametrize("command", ["inspect", "replay"])
def test_tool_calls_that_are_not_objects_are_a_one_line_error(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "calls.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": ["c1"]},
                {"role": "tool", "tool_call_id": "c1", "content": "out"},
            ]
        ),
        encoding="utf-8",
    )
    extra = ["--no-plot", "-q"] if command == "replay" else []
    code, _, err = run(capsys, command, path, *extra)
    assert code == 2
    assert "Traceback" not in err
    assert "calls.json message 1: 'tool_calls' must be a list of objects" in err
