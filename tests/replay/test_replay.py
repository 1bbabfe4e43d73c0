"""Tests for the replay: metrics, strategies, the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import TiktokenCounter
from langchain_context_guard.cli import main_replay
from langchain_context_guard.replay import (
    STRATEGIES,
    ContextEditing,
    Prompt,
    ScriptedSummarizer,
    Strategy,
    Summarization,
    SummaryCall,
    billed_input,
    cached_prefix,
    evidence,
    identifiers,
    make_strategies,
    message_key,
    percentile,
    replay,
    tool_pairing_errors,
)
from langchain_context_guard.replay._metrics import OUTPUT_RATE
from tests.replay._support import SHARED, transcripts, write_trajectories


def _call(k: int, command: str = "ls") -> AIMessage:
    call = {"name": "bash", "args": {"command": command}, "id": f"c{k}"}
    return AIMessage("", tool_calls=[call], id=f"a{k}")


def _result(k: int, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, tool_call_id=f"c{k}", id=f"t{k}")


HEAD: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("task")]


# --- metric functions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "cached", "expected"),
    [
        pytest.param([100, 200, 50], 0, 350, id="nothing-cached"),
        pytest.param([100, 200, 50], 2, 0.1 * 300 + 50, id="two-cached"),
        pytest.param([100, 200, 50], 3, 35, id="all-cached"),
    ],
)
def test_billed_input_bills_cached_prefix_at_ten_percent(
    tokens: list[float], cached: int, expected: float
) -> None:
    assert billed_input(tokens, cached) == pytest.approx(expected)


def test_billed_input_takes_a_cache_rate() -> None:
    assert billed_input([100, 100], 1, cache_rate=0.5) == pytest.approx(150)


def test_cached_prefix_compares_messages_by_content() -> None:
    before = [*HEAD, _call(1), _result(1, "a")]
    same = [m.model_copy() for m in before]
    rewritten = [*HEAD, _call(1), _result(1, "b")]
    keys = [message_key(m) for m in before]
    assert cached_prefix(keys, [message_key(m) for m in same]) == 4
    assert cached_prefix(keys, [message_key(m) for m in rewritten]) == 3
    assert cached_prefix([], keys) == 0
    grown = [*keys, message_key(_call(2))]
    assert cached_prefix(keys, grown) == 4


def test_message_key_ignores_ids_and_metadata() -> None:
    a = _result(1, "x")
    b = a.model_copy(update={"id": "other", "additional_kwargs": {"k": 1}})
    assert message_key(a) == message_key(b)
    assert message_key(a) != message_key(_result(2, "x"))


def test_pairing_checker_accepts_answered_calls() -> None:
    messages = [*HEAD, _call(1), _result(1), _call(2), _result(2)]
    assert tool_pairing_errors(messages) == []


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param([*HEAD, _result(1), _call(2), _result(2)], id="orphan-result"),
        pytest.param([*HEAD, _call(1), _call(2), _result(2)], id="unanswered-call"),
        pytest.param(
            [*HEAD, _call(1), HumanMessage("hi"), _result(1)], id="displaced-result"
        ),
        pytest.param([*HEAD, _call(1), _result(1), _result(1)], id="duplicate-result"),
        pytest.param([SystemMessage("s"), _result(7)], id="result-after-system"),
        pytest.param(
            [*HEAD, _call(1), _result(1), _call(1), _result(1)], id="repeated-call-id"
        ),
    ],
)
def test_pairing_checker_catches_what_providers_reject(
    messages: list[BaseMessage],
) -> None:
    assert tool_pairing_errors(messages)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "sed -n '230,300p' ./django/db/models/query.py",
            {"django/db/models/query.py", "query.py", "230", "300"},
            id="path-and-line-numbers",
        ),
        pytest.param(
            "grep get_queryset QuerySet python cat self __init__",
            {"get_queryset", "QuerySet", "__init__"},
            id="code-names-not-words",
        ),
        pytest.param(
            "python tests/runtests.py admin_views.tests -v 2",
            {"tests/runtests.py", "runtests.py", "admin_views.tests", "admin_views"},
            id="dotted-module",
        ),
        pytest.param("ls -la && cd /testbed", set(), id="nothing"),
    ],
)
def test_identifiers(text: str, expected: set[str]) -> None:
    assert identifiers(text) == expected


def test_evidence_counts_earlier_identifiers_still_sent() -> None:
    seen = identifiers("open pkg/mod_1.py and pkg/mod_2.py, see parse_value")
    sent = [identifiers("pkg/mod_1.py line 120")]
    action = "sed -n 1,40p pkg/mod_1.py pkg/mod_2.py pkg/new_file.py && parse_value"
    # earlier: pkg/mod_N.py, mod_N.py and mod_N for N = 1, 2, and parse_value
    assert evidence(action, seen, sent) == (7, 3)
    assert evidence("ls", seen, sent) == (0, 0)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 0.5) == 5
    assert percentile(values, 0.9) == 9
    assert percentile([], 0.5) == 0


# --- strategies ------------------------------------------------------------------


def test_scripted_summarizer_lists_identifiers_newest_first() -> None:
    model = ScriptedSummarizer()
    prompt = "Messages to summarize:\nread pkg/a.py then get_value in pkg/b.py"
    text = model.invoke(prompt).text
    assert text.splitlines() == ["## ARTIFACTS", "pkg/b.py", "get_value", "pkg/a.py"]
    assert model.invoke(prompt).text == text


def test_scripted_summarizer_reads_an_appended_prompt_less_what_is_kept() -> None:
    from langchain_context_guard.compaction._summary import parse_sections

    ask = HumanMessage(
        "Everything before its last 2 message(s) will be deleted. Answer in "
        "<completed>...</completed> and the other sections."
    )
    prompt = [
        SystemMessage("You edit get_system_name in sys/prompt.py."),
        *HEAD[1:],
        _call(1, "cat pkg/core.py"),
        _result(1, "def parse_value(text): line 1234"),
        _call(2, "cat pkg/kept.py"),
        _result(2, "keep_this_name"),
        ask,
    ]
    model = ScriptedSummarizer()
    sections = parse_sections(model.invoke(prompt).text)
    assert sections.completed == ["cat pkg/core.py"]
    assert sections.files == ["pkg/core.py"]
    assert sections.current_state == ["parse_value"]
    assert sections.notes == ["1234"]
    assert sections.remaining == []  # a plan it cannot know
    written = " ".join(model.calls[0].reply.split())
    assert "kept" not in written and "get_system_name" not in written
    assert model.take_calls()[0].prompt == tuple(prompt) and model.calls == []


def test_summarization_keeps_its_summary_in_state_between_calls() -> None:
    history = next(iter(transcripts(1, lines=8).values()))
    strategy = Summarization(16_000, 3_000)
    calls = [k for k, m in enumerate(history) if isinstance(m, AIMessage)]
    sent: list[BaseMessage] = []
    summaries = []
    for k in calls:
        sent, made, _ = strategy.prompt(history[:k])
        summaries += made
    assert len(sent) < len(history)
    assert isinstance(sent[0], SystemMessage)
    assert "summary of the conversation" in sent[1].text
    assert summaries  # the summary calls are handed to the loop, which bills them
    assert all("Messages to summarize:" in c.prompt[-1].text for c in summaries)
    assert all(c.reply.startswith("## ARTIFACTS") for c in summaries)
    assert tool_pairing_errors(sent) == []


def test_summarization_middleware_summarizes_tool_runs_into_a_placeholder() -> None:
    # Its own trim before the summary call starts on a human message, and long
    # tool runs leave none: the summary model is not even asked.
    history = next(iter(transcripts(1).values()))
    strategy = Summarization(16_000, 14_000)
    for k, m in enumerate(history):
        if isinstance(m, AIMessage):
            sent, summaries, _ = strategy.prompt(history[:k])
            assert summaries == ()
    assert "too long to summarize" in sent[1].text


def test_context_editing_clears_old_tool_results_on_the_request() -> None:
    history = next(iter(transcripts(1).values()))
    strategy = ContextEditing(16_000)
    sent, *_ = strategy.prompt(history)
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert [m.text for m in results[:-3]] == ["[cleared]"] * (len(results) - 3)
    assert all(m.text != "[cleared]" for m in results[-3:])
    assert history[-1].text != "[cleared]"  # the request was copied, not edited


def test_the_persist_strategy_sends_the_stored_history_it_wrote() -> None:
    """Each call prepares the prompt it sent last and the new messages."""
    history: list[BaseMessage] = [*HEAD, _call(0), _result(0, "x " * 3_000)]
    history += [AIMessage("Option A or B?", id="ans"), HumanMessage("B", id="re")]
    for k in range(1, 40):
        history += [_call(k, f"grep -n s{k} src"), _result(k, f"line {k}\n" * 400)]
    (strategy,) = make_strategies(
        ["persist"],
        16_000,
        2_000,
        counter=TiktokenCounter(),
        guard_variants={"persist": {"persist": True}},
    )
    last: list[BaseMessage] = []
    calls = [k for k, m in enumerate(history) if isinstance(m, AIMessage)]
    for k in [*calls, len(history)]:  # each model call's history, as replayed
        sent = strategy.prompt(history[:k]).sent
        assert tool_pairing_errors(sent) == []
        # The stored history, then what came since: nothing else.
        assert {m.id for m in sent} <= {m.id for m in [*last, *history]}
        last = sent
    ids = [m.id for m in last]
    assert sum(len(m.text) for m in last) < sum(len(m.text) for m in history) / 4
    assert ids[ids.index("ans") + 1] == "re"  # the reply kept with its answer
    strategy.start()
    assert strategy.prompt(history[:2]).sent == history[:2]  # a new transcript


def test_make_strategies_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        make_strategies(["magic"], 32_000, 4_000, counter=TiktokenCounter())


# --- the replay -------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_replay() -> dict[tuple[int, str], dict[str, object]]:
    result = replay(transcripts(2), windows=[16_000, 128_000])
    return {(r["window"], r["strategy"]): r for r in result.rows()}


def test_replay_reports_every_strategy_and_window(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    assert set(small_replay) == {(w, s) for w in (16_000, 128_000) for s in STRATEGIES}


def test_unpruned_prompts_count_exactly_what_the_provider_billed(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    provider = sum(
        int(m.response_metadata["prompt_tokens"])
        for msgs in transcripts(2).values()
        for m in msgs
        if isinstance(m, AIMessage)
    )
    row = small_replay[(128_000, "none")]
    assert row["input_tokens"] == provider
    assert row["evidence_retention_pct"] == 100.0
    assert row["over_budget"] == 0


def test_the_guard_stays_in_budget_with_valid_pairs(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    row = small_replay[(16_000, "guard")]
    assert row["over_budget"] == 0
    assert row["bad_pairing"] == 0
    assert row["errors"] == 0
    assert small_replay[(16_000, "none")]["over_budget"] > 0


def test_the_guard_with_compaction_stays_in_budget(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    row = small_replay[(16_000, "guard+compaction")]
    assert (row["over_budget"], row["bad_pairing"], row["errors"]) == (0, 0, 0)
    assert row["input_tokens"] < small_replay[(16_000, "none")]["input_tokens"]


def test_usage_anchored_counting_beats_plain_tiktoken() -> None:
    result = replay(transcripts(1), windows=[128_000], strategies=["none"])
    counters = {c["counter"]: c for c in result.to_dict()["counters"]}
    assert counters["tiktoken+usage"]["median_error_pct"] <= 0.5
    assert counters["tiktoken"]["median_error_pct"] > 5


@pytest.mark.skipif(SHARED is None, reason="shared trajectories not found")
def test_replay_of_two_shared_transcripts() -> None:
    from langchain_context_guard.replay import load_paths

    assert SHARED is not None
    files = sorted(SHARED.glob("*.traj.json"))[:2]
    result = replay(load_paths(files), windows=[32_000])
    rows = {r["strategy"]: r for r in result.rows()}
    assert rows["none"]["billed_vs_none"] == 1.0
    # Only a strategy that calls a summary model pays for output.
    assert rows["guard"]["billed_with_output"] == rows["guard"]["billed_input"]
    summary = rows["summarization"]
    assert summary["billed_with_output"] >= summary["billed_input"]
    assert rows["guard"]["bad_pairing"] == 0
    assert 0 < rows["guard"]["evidence_retention_pct"] <= 100


class _SummaryEveryCall(Strategy):
    """Sends the whole history; before each call after the first, one summary call
    whose prompt is the previous prompt plus an instruction (``appended``) or that
    prompt serialised into one fresh message."""

    def __init__(self, appended: bool) -> None:
        self.appended = appended
        self.name = "appended" if appended else "fresh"
        self.last: list[BaseMessage] = []

    def start(self) -> None:
        self.last = []

    def prompt(self, history: list[BaseMessage], now: float | None = None) -> Prompt:
        ask = HumanMessage("Summarise the conversation above.")
        quoted = HumanMessage("\n".join(m.text for m in self.last))
        asked = (*self.last, ask) if self.appended else (quoted,)
        calls = (SummaryCall(asked, "<files>\n- pkg/a.py\n</files>"),)
        made = calls if self.last else ()
        self.last = history
        return Prompt(history, made)


def test_summary_calls_bill_the_prefix_of_the_last_prompt_at_the_cache_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_context_guard.replay import _loop

    def build(names: object, window: int, reserve: int, **_: object) -> list[Strategy]:
        return [Strategy(), _SummaryEveryCall(True), _SummaryEveryCall(False)]

    monkeypatch.setattr(_loop, "make_strategies", build)
    rows = {r["strategy"]: r for r in replay(transcripts(1), windows=[128_000]).rows()}
    none, appended, fresh = rows["none"], rows["appended"], rows["fresh"]
    assert appended["summary_calls"] == fresh["summary_calls"] > 0
    for row in (appended, fresh):
        extra = row["billed_input"] - none["billed_input"]
        cached, spent = row["summary_cached_tokens"], row["summary_input_tokens"]
        assert extra == pytest.approx(0.1 * cached + spent - cached, abs=3)
        output = row["summary_output_tokens"]
        assert output > 0
        assert row["billed_with_output"] == pytest.approx(
            row["billed_input"] + OUTPUT_RATE * output, abs=2
        )
    assert fresh["summary_cached_tokens"] == 0  # a fresh prompt reads no cache
    assert appended["summary_cached_tokens"] > 0.9 * appended["summary_input_tokens"]
    assert appended["billed_input"] < fresh["billed_input"]


def test_the_append_mode_reads_the_cache_the_serialised_one_does_not(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    serial = small_replay[(16_000, "guard+compaction")]
    append = small_replay[(16_000, "guard+compaction_append")]
    assert serial["summary_calls"] == append["summary_calls"] > 0
    assert serial["summary_cached_tokens"] == 0
    cached, spent = append["summary_cached_tokens"], append["summary_input_tokens"]
    assert isinstance(cached, int) and isinstance(spent, int)
    assert cached > spent / 2
    assert (append["over_budget"], append["bad_pairing"], append["errors"]) == (
        0,
        0,
        0,
    )


# --- main_replay --------------------------------------------------------------------


def test_main_replay_writes_json_and_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_trajectories(tmp_path / "data")
    out_json, out_png = tmp_path / "replay.json", tmp_path / "replay.png"
    argv = [str(data), "-w", "16k", "-s", "none", "-s", "guard", "--quiet"]
    code = main_replay([*argv, "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    report = json.loads(out_json.read_text())
    assert report["transcripts"] == 2
    assert [r["strategy"] for r in report["results"]] == ["none", "guard"]
    assert report["command"].startswith("context-guard replay ")
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "| 16k | guard |" in out


def test_main_replay_passes_guard_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_trajectories(tmp_path / "data", n=1)
    argv = [str(data), "-w", "16k", "-s", "guard", "--quiet", "--no-plot"]
    assert main_replay([*argv, "--guard-option", "usage_anchoring=false"]) == 0
    assert "| 16k | guard |" in capsys.readouterr().out
    assert main_replay([*argv, "--guard-option", "keep_recent_tool_results=-1"]) == 2
    assert "keep_recent_tool_results" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["{missing}"], "cannot read", id="missing-file"),
        pytest.param(["{empty}"], "no transcripts found", id="empty-directory"),
    ],
)
def test_main_replay_reports_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    paths = {"missing": str(tmp_path / "nope.json"), "empty": str(tmp_path / "empty")}
    code = main_replay([a.format(**paths) for a in argv] + ["--quiet", "--no-plot"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_main_replay_rejects_a_bad_window(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main_replay(["-w", "big"])
    assert "invalid window 'big'" in capsys.readouterr().err


# --- signed thinking ------------------------------------------------------------


def test_signed_thinking_counts_calls_a_binding_model_would_reject() -> None:
    result = replay(
        transcripts(2),
        windows=[16_000],
        strategies=["none", "sticky_cut", "guard", "guard_no_stable"],
        signed_thinking=True,
    )
    rows = {r["strategy"]: r for r in result.rows()}
    calls = rows["none"]["calls"]
    assert rows["none"]["signed_kept_calls"] == calls - 2  # all but each first call
    assert rows["none"]["signed_rejected_calls"] == 0
    assert rows["sticky_cut"]["signed_rejected_calls"] > 0  # after each cut
    for name in ("guard", "guard_no_stable"):
        row = rows[name]
        assert row["signed_rejected_calls"] == 0
        assert row["signed_kept_calls"] > 0 and row["signed_dropped_calls"] > 0
    assert result.to_dict()["signed_thinking"] is True


def test_without_bound_thinking_the_guard_sends_stale_blocks() -> None:
    result = replay(
        transcripts(2),
        windows=[16_000],
        strategies=["guard"],
        guard_variants={"guard": {"bound_thinking": False}},
        signed_thinking=True,
    )
    assert result.rows()[0]["signed_rejected_calls"] > 0


def test_main_replay_shows_the_signed_thinking_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_trajectories(tmp_path / "data", n=1)
    argv = [str(data), "-w", "16k", "-s", "guard", "--quiet", "--no-plot"]
    assert main_replay(argv) == 0
    assert capsys.readouterr().out.splitlines()[2].endswith("| - |")
    assert main_replay([*argv, "--signed-thinking"]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    kept, _, rejected = row.rsplit("|", 2)[1].split(" / ")
    assert int(kept) > 0 and int(rejected) == 0


def test_the_compaction_strategies_report_their_summaries_per_run(
    small_replay: dict[tuple[int, str], dict[str, object]],
) -> None:
    row = small_replay[(16_000, "guard+compaction")]
    mean, most = row["summaries_per_run"], row["summaries_per_run_max"]
    assert isinstance(mean, int | float) and isinstance(most, int)
    assert 0 < mean <= most <= row["summary_calls"]
    assert small_replay[(16_000, "guard")]["summaries_per_run_max"] == 0
