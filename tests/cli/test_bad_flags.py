"""Every user error ends with exit 2 and a line naming the flag or file and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from langchain_context_guard import ContextGuard, GuardPolicy
from tests.cli._support import checkpoint_db, openai_history, run, write_json

REPLAY = ["replay", "-s", "guard", "-w", "32k", "-q"]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    return write_json(tmp_path / "chat.json", openai_history(2))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inspect", "{tmp}"], ["is a folder", "give a transcript file"]),
        (["inspect", "."], [". is a folder"]),
        (
            ["demo", "--model", "scripted", "--steps", "1", "--db", "{tmp}/no/x.db"],
            ["--db", "does not exist", "create it first"],
        ),
        (["demo", "--steps", "0"], ["--steps", "at least 1"]),
        ([*REPLAY, "--limit", "0", "{chat}"], ["--limit", "at least 1"]),
        (
            [*REPLAY, "--json", "{tmp}/no/r.json", "{chat}"],
            ["--json", "does not exist"],
        ),
        ([*REPLAY, "--plot", "{tmp}/no/p.png", "{chat}"], ["--plot", "not exist"]),
        ([*REPLAY, "--plot", "{tmp}", "{chat}"], ["--plot", "is a folder"]),
        (
            [*REPLAY, "--no-plot", "--json", "/proc/no-such/r.json", "{chat}"],
            ["--json", "/proc/no-such", "choose another path"],
        ),
        ([*REPLAY, "--plot", "/proc/p.png", "{chat}"], ["--plot", "another path"]),
        (["inspect", "--window", "32x", "{chat}"], ["--window", "32k"]),
        ([*REPLAY, "--cache-ttl", "5 min", "{chat}"], ["--cache-ttl", "5m or 1h"]),
        (
            [*REPLAY, "--gap-model", "pauses:0.1", "{chat}"],
            ["--gap-model", "pauses:SHARE:DURATION"],
        ),
    ],
    ids=[
        "inspect-folder",
        "inspect-dot",
        "demo-db-folder",
        "demo-steps",
        "replay-limit",
        "replay-json-folder",
        "replay-plot-folder",
        "replay-plot-is-dir",
        "replay-json-unwritable",
        "replay-plot-unwritable",
        "inspect-window",
        "replay-cache-ttl",
        "replay-gap-model",
    ],
)
def test_bad_input_is_one_named_line_with_exit_2(
    argv: list[str],
    expected: list[str],
    tmp_path: Path,
    chat: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [a.format(tmp=tmp_path, chat=chat) for a in argv]
    code, _, err = run(capsys, *args)
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert all(text in last for text in expected), last
    assert not (tmp_path / "no").exists()  # no folder is created behind the user


def test_windows_read_the_same_everywhere(
    chat: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", "--window", "32k", chat)
    assert code == 0 and "32,000" in out


def test_one_reserve_rule_for_a_window_everywhere(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", "--window", "16k", "--json", chat)
    inspected = json.loads(out)
    assert code == 0 and inspected["reserve_tokens"] == 2_000
    assert inspected["report"]["budget"] == 14_000
    results = tmp_path / "r.json"
    code, _, _ = run(
        capsys, *REPLAY[:-2], "16k", "-q", "--no-plot", "--json", results, chat
    )
    replayed = json.loads(results.read_text())["results"][0]
    assert code == 0 and (replayed["reserve"], replayed["budget"]) == (2_000, 14_000)
    db = tmp_path / "demo.sqlite"
    code, out, _ = run(capsys, "demo", "--steps", 1, "--window", "16k", "--db", db)
    assert code == 0 and "window 16,000 tokens, reserve 2,000: budget 14,000" in out
    model = GenericFakeChatModel(
        messages=iter([]), profile={"max_input_tokens": 16_000}
    )
    assert ContextGuard(GuardPolicy()).budget(model) == 14_000  # the middleware's


def test_an_unknown_model_says_the_window_is_a_default_once(
    chat: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "inspect", "--model", "foo-unknown-9", chat)
    assert code == 0
    notes = [line for line in err.splitlines() if "foo-unknown-9" in line]
    assert len(notes) == 1
    assert "default 128,000 tokens" in notes[0] and "--window" in notes[0]


def test_a_misspelled_environment_variable_is_named(
    chat: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_context_guard.engine import _env

    monkeypatch.setattr(_env, "_warned_env", set())
    monkeypatch.setenv("CONTEXT_GUARD_RESERVE_TOKEN", "1000")
    code, _, err = run(capsys, "inspect", chat)
    assert code == 0  # ignored with a note, as LangChain-style settings warn
    line = next(x for x in err.splitlines() if "note:" in x)
    assert "CONTEXT_GUARD_RESERVE_TOKEN " in line
    assert "CONTEXT_GUARD_RESERVE_TOKENS" in line


def _not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "guard.yaml"
    path.write_bytes(b"reserve_tokens: 1000\ncomment: caf\xe9\n")  # Latin-1
    return path


def _corrupt_db(tmp_path: Path) -> Path:
    """A SQLite checkpoint file whose pages past the header are overwritten."""
    path = checkpoint_db(tmp_path / "broken.db")
    data = bytearray(path.read_bytes())
    data[4_096:] = b"Z" * (len(data) - 4_096)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inspect", "--window", "inf", "{chat}"], ["--window", "'inf'"]),
        (["inspect", "--window", "1e400", "{chat}"], ["--window", "'1e400'"]),
        ([*REPLAY[:3], "-w", "inf", "-q", "{chat}"], ["--window", "'inf'"]),
        (["inspect", "--config", "{yaml}", "{chat}"], ["--config", "{yaml}", "UTF-8"]),
        (
            ["demo", "--model", "scripted", "--steps", "1", "--db", "{db}"],
            ["--db", "{db}", "malformed"],
        ),
        (
            [*REPLAY, "--no-plot", "--json", "/dev/full", "{chat}"],
            ["--json /dev/full", "cannot write"],
        ),
    ],
    ids=[
        "window-inf",
        "window-overflow",
        "replay-window-inf",
        "config-not-utf8",
        "demo-db-corrupt",
        "replay-json-full",
    ],
)
def test_hostile_values_name_the_flag_and_the_path(
    argv: list[str],
    expected: list[str],
    tmp_path: Path,
    chat: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = {"tmp": tmp_path, "chat": chat}
    if "{yaml}" in argv:
        files["yaml"] = _not_utf8(tmp_path)
    if "{db}" in argv:
        files["db"] = _corrupt_db(tmp_path)
    args = [a.format(**files) for a in argv]
    code, _, err = run(capsys, *args)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert all(text.format(**files) in lines[0] for text in expected), lines[0]
