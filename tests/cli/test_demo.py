from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_context_guard import GuardPolicy
from langchain_context_guard.cli._demo import run_demo
from langchain_context_guard.cli._demo_command import choose_model
from langchain_context_guard.cli._demo_model import (
    ScriptedAgentModel,
    answer_from,
    next_step,
    scripted_summary,
)
from langchain_context_guard.cli._demo_repo import (
    BUG_FILE,
    FACT,
    FACT_FILE,
    exploration_plan,
    make_tools,
    write_repository,
)
from tests.cli._support import run

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def test_demo_runs_offline_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.sqlite"
    code, out, err = run(capsys, "demo", "--steps", 30, "--db", db)
    assert (code, err) == (0, "")
    assert out.startswith(
        "model: scripted, offline (no OPENAI_API_KEY or ANTHROPIC_API_KEY)"
    )
    progress = re.findall(r"^call +(\d+) .* ([\d,]+) tokens sent", out, re.M)
    # 30 tool calls, one to read the pruned billing docs back, the answer
    assert [int(k) for k, _ in progress] == list(range(1, 33))
    assert all(int(t.replace(",", "")) <= 28_000 for _, t in progress)
    assert "with the guard   all 32 calls within budget" in out
    assert re.search(
        r"early fact +the rounding rule in docs/billing.md, read at call 2: pruned "
        r"from the input from call \d+; the agent read it back at call 31, so the "
        r"final call had it; the answer quotes it",
        out,
    )
    assert f"answer           The cause is apply_discount in {BUG_FILE}" in out
    assert f"checkpoints      {db} (SQLite), thread demo-1" in out
    code, out, _ = run(capsys, "inspect", db, "--thread", "demo-1", "--window", 32_000)
    assert code == 0
    assert "thread demo-1:" in out


def test_demo_result_keeps_every_call_within_budget(tmp_path: Path) -> None:
    seen: list[int] = []
    result = run_demo(
        POLICY,
        steps=40,
        db=tmp_path / "d.sqlite",
        on_call=lambda c: seen.append(c.index),
    )
    assert seen == list(range(1, 43))
    assert result.over_budget == 0
    assert all(c.tokens_with <= result.budget for c in result.calls)
    assert result.peak_without > result.budget  # the guard was needed
    assert result.over_budget_without > 0
    assert result.total_with < result.total_without
    assert 0.3 < result.savings < 1
    assert result.events.get("compaction", 0) >= 1
    assert "apply_discount" in result.answer
    assert (result.context_window, result.window_source) == (32_000, "override")


def test_demo_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "demo.sqlite"
    code, out, err = run(capsys, "demo", "--steps", 5, "--db", db, "--json")
    assert code == 0
    assert err.startswith("model: scripted")
    doc = json.loads(out)
    assert len(doc["calls"]) == 6
    assert doc["over_budget"] == 0
    assert doc["thread_id"] == "demo-1"
    assert set(doc["calls"][0]) == {
        "index",
        "tokens_with",
        "tokens_without",
        "messages_sent",
        "messages_total",
        "events",
        "billed_with",
        "billed_without",
        "fact_in_input",
    }
    assert doc["fact_status"] == "kept"  # five calls: nothing pruned yet
    assert 0 < doc["billed_with"] <= doc["total_with"]


def test_demo_appends_a_new_thread_to_an_existing_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.sqlite"
    assert run(capsys, "demo", "--steps", 2, "--db", db)[0] == 0
    code, out, _ = run(capsys, "demo", "--steps", 2, "--db", db, "--json")
    assert (code, json.loads(out)["thread_id"]) == (0, "demo-2")
    code, out, _ = run(capsys, "inspect", db)
    assert (code, "2 thread(s)" in out) == (0, True)


def test_demo_reads_window_from_config_and_flags_win(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "guard.yaml"
    config.write_text("context_window: 64000\nreserve_tokens: 6000\n")
    args = ("demo", "--steps", 2, "--db", tmp_path / "d.sqlite", "--json")
    code, out, _ = run(capsys, *args, "--config", config)
    doc = json.loads(out)
    assert (code, doc["context_window"], doc["budget"]) == (0, 64_000, 58_000)
    code, out, _ = run(capsys, *args, "--config", config, "--window", 40_000)
    assert (code, json.loads(out)["budget"]) == (0, 34_000)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--steps", "0"), "--steps: must be at least 1"),
        (("--window", "9000", "--reserve", "1000"), "below the minimum of 16,000"),
        (("--window", "20000", "--reserve", "30000"), "reserve"),
        (("--model", "nosuchprovider:some-model"), "--model nosuchprovider:some-model"),
    ],
    ids=["no-steps", "tiny-window", "reserve-over-window", "unknown-provider"],
)
def test_demo_bad_settings_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    message: str,
) -> None:
    code, out, err = run(capsys, "demo", "--db", tmp_path / "d.sqlite", *args)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert message in err
    assert not (tmp_path / "d.sqlite").exists()


def test_demo_refuses_a_db_that_is_not_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("hello")
    code, _, err = run(capsys, "demo", "--db", db)
    assert code == 2
    assert "exists and is not a SQLite database" in err


def test_choose_model_explains_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    assert choose_model("scripted")[0] is None
    model, why = choose_model("auto", {})
    assert model is None
    assert "no OPENAI_API_KEY or ANTHROPIC_API_KEY" in why
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    model, why = choose_model("auto", {"OPENAI_API_KEY": "sk-test"})
    assert model is None
    assert "OPENAI_API_KEY is set but langchain-openai is not installed" in why


def test_scripted_model_follows_the_plan_from_what_it_sees() -> None:
    plan = exploration_plan(5)
    model = ScriptedAgentModel(plan=plan)
    first = model.invoke([HumanMessage("go")])
    assert isinstance(first, AIMessage)
    assert first.tool_calls[0]["id"] == "call_0"
    call = {"name": "ls", "args": {}, "id": "call_3"}
    seen = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("x", tool_call_id="call_3"),
    ]
    assert next_step(seen) == 4  # older calls trimmed away: still step 4
    last = model.invoke([*seen, AIMessage("", tool_calls=[{**call, "id": "call_4"}])])
    assert isinstance(last, AIMessage)
    assert not last.tool_calls


def test_answer_comes_from_the_visible_evidence(tmp_path: Path) -> None:
    root = write_repository(tmp_path)
    grep = {t.name: t for t in make_tools(root)}["grep"]
    pattern = exploration_plan(3)[-1][1]["pattern"]
    hits = grep.invoke({"pattern": pattern, "path": BUG_FILE})
    answer = answer_from([ToolMessage(hits, tool_call_id="c")])
    assert answer.startswith(f"The cause is apply_discount in {BUG_FILE}: line ")
    assert answer_from([ToolMessage("nothing here", tool_call_id="c")]).startswith(
        "I could not"
    )


def test_tools_are_real_and_stay_inside_the_repository(tmp_path: Path) -> None:
    root = write_repository(tmp_path / "repo")
    (tmp_path / "secret.txt").write_text("no")
    tools = {t.name: t for t in make_tools(root)}
    listing = tools["ls"].invoke({"path": "."})
    assert "shopfront/" in listing and "README.md" in listing
    assert len(tools["cat"].invoke({"path": "logs/app-0.log"})) > 50_000
    assert "no such file" in tools["cat"].invoke({"path": "../secret.txt"})
    hits = tools["grep"].invoke({"pattern": "ERROR", "path": "logs"})
    assert hits.splitlines()[0].startswith("logs/app-0.log:")
    assert "bad pattern" in tools["grep"].invoke({"pattern": "(", "path": "."})


def test_scripted_summary_has_sections() -> None:
    prompt = [
        HumanMessage(
            '<conversation>\n[assistant called cat] {"path": "logs/app-1.log"}\n'
            "[tool result cat]\n2024 ERROR shopfront.billing.service mismatch\n"
            "</conversation>"
        )
    ]
    text = scripted_summary(prompt)
    assert "<files>\n- logs/app-1.log: read\n</files>" in text
    assert "seen in the logs: 2024 ERROR shopfront.billing.service mismatch" in text


def test_the_answer_depends_on_whether_the_guard_kept_the_early_fact(
    tmp_path: Path,
) -> None:
    roomy = run_demo(
        GuardPolicy(context_window=128_000, reserve_tokens=8_000),
        steps=16,
        db=":memory:",
    )
    assert (roomy.fact_status, roomy.fact_read_at, roomy.read_back_at) == ("kept", 2, 0)
    assert all(c.fact_in_input for c in roomy.calls[2:])
    assert roomy.answer_quotes_fact and FACT in roomy.answer

    tight = run_demo(POLICY, steps=40, db=":memory:")
    assert tight.fact_status == "read back"
    assert tight.fact_read_at == 2 < tight.fact_dropped_at < tight.read_back_at
    assert not tight.calls[tight.fact_dropped_at - 1].fact_in_input
    assert tight.calls[-1].fact_in_input
    assert tight.answer_quotes_fact


def test_scripted_model_reads_back_only_what_its_input_points_to() -> None:
    plan = exploration_plan(3)
    model = ScriptedAgentModel(plan=plan)
    grep = {"name": "grep", "args": {"path": BUG_FILE}, "id": "call_2"}
    hits = (
        f"{BUG_FILE}:224:def apply_discount(x):\n{BUG_FILE}:229:    return round(d, 1)"
    )
    end = [AIMessage("", tool_calls=[grep]), ToolMessage(hits, tool_call_id="call_2")]
    pointer = HumanMessage(f"[Context note: earlier you ran cat {FACT_FILE}]")

    back = model.invoke([HumanMessage("go"), pointer, *end])
    assert back.tool_calls == [
        {
            "name": "cat",
            "args": {"path": FACT_FILE},
            "id": "call_3",
            "type": "tool_call",
        }
    ]
    blind = model.invoke([HumanMessage("go"), *end])
    assert not blind.tool_calls
    assert "cannot see the billing docs' rounding rule" in blind.text
    assert FACT not in blind.text
    read = ToolMessage(f"# Billing\n{FACT}\n", tool_call_id="call_3")
    call = AIMessage("", tool_calls=[back.tool_calls[0]])
    answer = model.invoke([HumanMessage("go"), pointer, *end, call, read])
    assert not answer.tool_calls
    assert FACT in answer.text and "line 229" in answer.text


def test_exploration_plan_reads_the_fact_once_then_ends_on_the_bug() -> None:
    for steps in (4, 10, 60, 200):
        plan = exploration_plan(steps)
        assert len(plan) == steps
        reads = [k for k, (_, args, _) in enumerate(plan) if FACT_FILE in str(args)]
        assert reads == [1]
        assert plan[-1][1]["path"] == BUG_FILE
    assert [s[0] for s in exploration_plan(1)] == ["grep"]
    assert exploration_plan(0) == []


def test_the_demo_summarises_only_when_what_is_sent_needs_it() -> None:
    # The huge outputs are truncated before sending: they set off no summary.
    result = run_demo(POLICY, db=":memory:")
    at = [c.index for c in result.calls if "compaction" in c.events]
    assert 1 <= len(at) <= 4
    assert all(b - a > 1 for a, b in pairwise(at))  # never two in a row
    assert result.answer_quotes_fact
