"""Tests for the honest quality metrics: content/line evidence, needles, baselines."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import (
    MARKER_KEY,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
)
from langchain_context_guard.engine import result_key, result_ordinals
from langchain_context_guard.engine.passes._digest_turns import cleared_result
from langchain_context_guard.engine.passes._paged_reads import paged_read
from langchain_context_guard.engine.passes._text import compress_lines, truncate_text
from langchain_context_guard.replay import (
    DISTANCES,
    Prompt,
    StickyCut,
    StickyCutNewest,
    Strategy,
    ask_plan,
    from_history,
    message_text,
    needles_in,
    plot_tradeoff,
    replay,
    strip_notes,
)
from tests.replay._support import transcripts


def _call(k: int, command: str) -> AIMessage:
    call = {"name": "bash", "args": {"command": command}, "id": f"c{k}"}
    return AIMessage("", tool_calls=[call], id=f"a{k}")


def _result(k: int, text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=f"c{k}", id=f"t{k}")


# --- what counts as sent from the history ---------------------------------------


def test_strip_notes_removes_truncation_and_compression_markers() -> None:
    text = "\n".join(f"line {i} pkg/mod_{i}.py" for i in range(40))
    cut = truncate_text(text, 300, 100, 100)
    short = compress_lines(text + "\n" + "x" * 500, 2, 1)
    read = f"@@ lines 1-40 of 40 @@\n{text}"
    paged = truncate_text(read, 600, 200, 200, paged=paged_read("read_file", read))
    assert "read_file(offset=" in paged
    for kept in (cut, short, paged):
        clean = strip_notes(kept)
        assert "truncated" not in clean
        assert "read_file(" not in clean
        assert "compressed by context guard" not in clean
        assert "chars]" not in clean
    assert strip_notes(text) == text


def test_from_history_excludes_what_the_library_writes() -> None:
    ids = {"t1", "m1"}
    kept = _result(1, "output")
    compressed = kept.model_copy(
        update={"additional_kwargs": {MARKER_KEY: {"kind": "compressed"}}}
    )
    digest = HumanMessage(
        "note", id="m1", additional_kwargs={MARKER_KEY: {"kind": "digest"}}
    )
    summary = HumanMessage("summary of pkg/mod.py", id="new-id")
    assert from_history(kept, ids)
    assert from_history(compressed, ids)
    assert not from_history(digest, ids)
    assert not from_history(summary, ids)


def test_joined_assistant_turns_still_count_as_history_text() -> None:
    """Two assistant turns in a row are sent joined (``enforce_provider_hygiene``):
    the joined message keeps a history id and the text of both, so the evidence
    it holds is still counted as sent from the history."""
    history: list[BaseMessage] = [
        HumanMessage("Fix it.", id="h"),
        AIMessage("I will read pkg/mod_7.py first.", id="a0"),
        _call(1, "cat pkg/mod_7.py"),
        _result(1, "def f(): ..."),
    ]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    ids = {m.id for m in history if m.id}
    joined = next(m for m in sent if isinstance(m, AIMessage))
    assert (joined.id, len(sent)) == ("a1", 3)
    assert from_history(joined, ids)
    assert "pkg/mod_7.py first" in message_text(joined)
    assert "cat pkg/mod_7.py" in message_text(joined)


class _DigestOnly(Strategy):
    """Replaces the history by a note naming everything: notes, no content."""

    name = "digest_only"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        names = " ".join(str(m.content) for m in history)
        note = HumanMessage(
            names, id="note", additional_kwargs={MARKER_KEY: {"kind": "digest"}}
        )
        return Prompt([history[0], note])


def test_a_note_naming_identifiers_counts_only_as_notes_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_context_guard.replay import _loop

    def build(names: object, window: int, reserve: int, **_: object) -> list[Strategy]:
        return [Strategy(), _DigestOnly()]

    monkeypatch.setattr(_loop, "make_strategies", build)
    rows = {r["strategy"]: r for r in replay(transcripts(1), windows=[128_000]).rows()}
    none, note = rows["none"], rows["digest_only"]
    assert none["content_evidence_pct"] == none["line_evidence_pct"] == 100.0
    assert note["evidence_seen"] > 0
    assert note["evidence_retention_pct"] > 50
    assert note["content_evidence_pct"] == 0
    assert note["line_evidence_pct"] == 0
    assert note["needle_pct"] == 0
    assert none["needle_pct"] == 100.0


# --- needles ----------------------------------------------------------------------


def test_needles_are_found_by_pattern_one_per_kind() -> None:
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/repo/pkg/core.py", line 88, in parse',
            '  File "/repo/pkg/util.py", line 12, in helper',
            '  File "/repo/pkg/deep.py", line 3, in inner',
            "ValueError: invalid literal for int() with base 10: 'x'",
            "pkg/core.py:120:    return parse_value(text)",
            "count = 42",
        ]
    )
    found = {n.kind: n.answer for n in needles_in(text, 5)}
    # 4 matches (3 frames, 1 grep hit): the middle one
    assert found["file_line"] == 'File "/repo/pkg/deep.py", line 3'
    assert found["error"].startswith("ValueError: invalid literal")
    assert found["value"] == "count = 42"
    assert set(found) <= {"file_line", "line_number", "error", "value"}


def test_needles_are_asked_later_at_fixed_distances() -> None:
    messages: list[BaseMessage] = [SystemMessage("s"), HumanMessage("task")]
    for k in range(40):
        messages += [_call(k, "ls"), _result(k, f"total = {k}00 files")]
    calls = [i for i, m in enumerate(messages) if isinstance(m, AIMessage)]
    asked = ask_plan(messages, calls)
    first = [n for n, group in enumerate(asked) if any(x.source == 3 for x in group)]
    assert first == [1 + d for d in DISTANCES]
    assert all(x.answer == "total = 000 files" for x in asked[4] if x.source == 3)
    assert [x.distance for x in asked[1 + DISTANCES[1]] if x.source == 3] == [
        DISTANCES[1]
    ]


class _Blanked(Strategy):
    """Sends every message, each tool result's text blanked: needles are cut."""

    name = "blanked"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        return Prompt(
            [
                m.model_copy(update={"content": "(cleared)"})
                if isinstance(m, ToolMessage)
                else m
                for m in history
            ]
        )


class _Headless(Strategy):
    """Sends the system message and the task only: needles are dropped."""

    name = "headless"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        return Prompt(history[:2])


def _cut_and_dropped(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Rows of sending everything, every result blanked, and the head alone."""
    from langchain_context_guard.replay import _loop

    def build(names: object, window: int, reserve: int, **_: object) -> list[Strategy]:
        return [Strategy(), _Blanked(), _Headless()]

    monkeypatch.setattr(_loop, "make_strategies", build)
    return {r["strategy"]: r for r in replay(transcripts(1), windows=[128_000]).rows()}


def test_lost_needles_are_told_apart_by_whether_their_source_was_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = _cut_and_dropped(monkeypatch)
    none, blanked, headless = rows["none"], rows["blanked"], rows["headless"]
    asked = none["needles_asked"]
    assert asked > 0
    assert (none["needles_lost_cut"], none["needles_lost_dropped"]) == (0, 0)
    assert set(none["needle_pct_by_distance"].values()) == {100.0}
    assert (blanked["needles_lost_cut"], blanked["needles_lost_dropped"]) == (asked, 0)
    assert (headless["needles_lost_cut"], headless["needles_lost_dropped"]) == (
        0,
        asked,
    )
    assert set(headless["needle_pct_by_distance"]) <= {str(d) for d in DISTANCES}


def test_a_call_whose_prompt_lacks_its_newest_message_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = _cut_and_dropped(monkeypatch)
    assert rows["none"]["newest_missing"] == 0
    assert rows["blanked"]["newest_missing"] == 0  # a cut copy is sent: its id
    headless = rows["headless"]
    assert 0 < headless["newest_missing"] <= headless["calls"]
    assert headless["calls"] - headless["newest_missing"] <= 1  # the first call's


# --- baselines --------------------------------------------------------------------


def test_sticky_cut_keeps_its_cut_until_over_then_halves() -> None:
    counter = TiktokenCounter()
    cut = StickyCut(2_000, counter)
    history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("the task")]
    cuts = []
    for k in range(60):
        history += [_call(k, f"cat pkg/mod_{k}.py"), _result(k, "word " * 60)]
        sent, *_ = cut.prompt(history)
        assert sent[:2] == history[:2]
        assert not isinstance(sent[2], ToolMessage)
        size = sum(map(counter.count_message, sent))
        assert size <= 2_000
        cuts.append(cut.cut)
    moves = [b for a, b in itertools.pairwise(cuts) if b != a]
    assert moves == sorted(moves)
    assert 2 <= len(moves) < 20


def test_sticky_cut_newest_sends_the_turn_the_sticky_cut_moves_past() -> None:
    counter = TiktokenCounter()
    history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("the task")]
    history += [_call(0, "cat small.py"), _result(0, "word " * 50)]
    huge = "\n".join(f"line {i} of pkg/big_{i}.py" for i in range(600))
    history += [_call(1, "cat big.py"), _result(1, huge)]
    plain, newest = StickyCut(2_000, counter), StickyCutNewest(2_000, counter)
    assert plain.prompt(history).sent == history[:2]  # the model cannot answer
    sent = newest.prompt(history).sent
    assert [m.id for m in sent[2:]] == ["a1", "t1"]
    assert sent[:3] == [*history[:2], history[4]]
    assert sum(map(counter.count_message, sent)) <= 2_000
    cut = sent[3].text
    assert cut.startswith("line 0 of") and cut.endswith("pkg/big_599.py")
    assert "[... cut ...]" in cut
    assert history[5].content == huge  # the caller's message is untouched
    history += [_call(2, "ls"), _result(2, "a.py b.py")]
    sent = newest.prompt(history).sent  # a turn that fits: the cut moves past
    assert sent == [*history[:2], *history[6:]]


def test_replay_runs_the_new_baselines() -> None:
    result = replay(
        transcripts(1), windows=[16_000], strategies=["sticky_cut", "guard_no_stable"]
    )
    rows = {r["strategy"]: r for r in result.rows()}
    assert rows["guard_no_stable"]["over_budget"] == 0
    assert rows["sticky_cut"]["bad_pairing"] == 0
    assert rows["sticky_cut"]["task_missing"] == 0


def test_plot_tradeoff_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = replay(transcripts(1), windows=[16_000], strategies=["none", "guard"])
    out = plot_tradeoff(result.rows(), tmp_path / "t.png", windows=[16_000])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _BlankedWithPointers(Strategy):
    """``_Blanked``, each cleared result's compression marker naming its key.

    With ``by_id``, its call id instead; unmarked, the same words are text a
    model or user wrote, which points to nothing. With ``placeholder``, the
    turns digest's one-line placeholder instead of a compression marker.
    """

    def __init__(
        self, *, by_id: bool = False, marked: bool = True, placeholder: bool = False
    ) -> None:
        self.by_id, self.marked, self.placeholder = by_id, marked, placeholder
        form = "placeholder" if placeholder else "pointing"
        self.name = f"blanked_{form}_{'id' if by_id else 'key'}_{marked}"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        places = result_ordinals(history)
        out: list[BaseMessage] = []
        for m in history:
            if isinstance(m, ToolMessage):
                name = (
                    m.tool_call_id if self.by_id else result_key(places[m.tool_call_id])
                )
                if self.placeholder:
                    out.append(cleared_result(m, name))
                    continue
                note = compress_lines("(cleared)\n" * 9, 0, 0, source=name)
                mark = {MARKER_KEY: {"kind": "compressed"}} if self.marked else {}
                m = m.model_copy(update={"content": note, "additional_kwargs": mark})
            out.append(m)
        return Prompt(out)


class _HeadlessWithDigest(Strategy):
    """``_Headless`` plus a digest listing every dropped call with its id."""

    name = "headless_digest"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        lines = [
            f"- {c['name']} ({c['id']}): ..."
            for m in history
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        ]
        note = HumanMessage(
            "\n".join(["[Context note]", *lines]),
            id="digest",
            additional_kwargs={MARKER_KEY: {"kind": "digest"}},
        )
        return Prompt([*history[:2], note])


class _HeadlessWithKeys(Strategy):
    """``_Headless`` plus a note naming the keys of the first ``named`` results.

    Marked as a digest or not (a user's text naming keys points to nothing).
    """

    def __init__(self, named: int | None, marked: bool = True) -> None:
        self.named, self.marked = named, marked
        self.name = f"headless_keys_{named}_{marked}"

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        results = sum(isinstance(m, ToolMessage) for m in history)
        last = results if self.named is None else min(self.named, results)
        line = f"Keys of all their archived outputs, oldest first: #1-#{last}"
        mark = {MARKER_KEY: {"kind": "digest"}} if self.marked else {}
        note = HumanMessage(
            "\n".join(["[Context note]", line]), id="digest", additional_kwargs=mark
        )
        return Prompt([*history[:2], note])


def test_a_needle_is_recoverable_when_a_pointer_to_its_source_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_context_guard.replay import _loop

    def build(names: object, window: int, reserve: int, **_: object) -> list[Strategy]:
        return [
            Strategy(),
            _Blanked(),
            _Headless(),
            _BlankedWithPointers(),
            _BlankedWithPointers(by_id=True),
            _BlankedWithPointers(marked=False),
            _BlankedWithPointers(placeholder=True),
            _HeadlessWithDigest(),
            _HeadlessWithKeys(None),
            _HeadlessWithKeys(2),
            _HeadlessWithKeys(None, marked=False),
        ]

    monkeypatch.setattr(_loop, "make_strategies", build)
    rows = {r["strategy"]: r for r in replay(transcripts(1), windows=[128_000]).rows()}
    assert rows["none"]["needles_asked"] > 0
    assert rows["none"]["needle_recoverable_pct"] == 100.0
    for lost in ("blanked", "headless"):
        assert rows[lost]["needle_pct"] < 100.0
        assert rows[lost]["needle_recoverable_pct"] == rows[lost]["needle_pct"]
    pointing_ones = (
        "blanked_pointing_key_True",
        "blanked_pointing_id_True",
        "blanked_placeholder_key_True",
        "headless_digest",
        "headless_keys_None_True",
    )
    for pointing in pointing_ones:
        assert rows[pointing]["needle_pct"] < 100.0
        assert rows[pointing]["needle_recoverable_pct"] == 100.0
    few, unmarked = rows["headless_keys_2_True"], rows["headless_keys_None_False"]
    assert few["needle_pct"] < few["needle_recoverable_pct"] < 100.0
    assert unmarked["needle_recoverable_pct"] == unmarked["needle_pct"]
    written = rows["blanked_pointing_key_False"]  # the model's words point nowhere
    assert written["needle_pct"] < 100.0
    assert written["needle_recoverable_pct"] == written["needle_pct"]
