import itertools

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_context_guard import (
    MARKER_KEY,
    compress_old_tool_results,
    truncate_tool_results,
)
from langchain_context_guard.engine.passes._compress import callers, compress_message
from tests.engine._support import agent_history, ai, call, lines, result, snapshot


def _results(history):
    return [m for m in history if isinstance(m, ToolMessage)]


def test_few_results_are_left_alone():
    history = agent_history(6)
    assert compress_old_tool_results(history, batch=1) is history


def test_keep_newest_six_whole_and_compress_older_ones():
    history = agent_history(10)
    out = compress_old_tool_results(history, batch=1)
    old, new = _results(out)[:4], _results(out)[4:]
    assert all(m.additional_kwargs[MARKER_KEY]["kind"] == "compressed" for m in old)
    assert new == _results(history)[4:]
    assert all(a is b for a, b in zip(new, _results(history)[4:], strict=True))


def test_a_truncated_result_compressed_later_names_its_original_size():
    body = "x = 1\n" * 2_000  # 12,000 characters, 2,001 lines
    history = [ai(call("c0")), result("c0", body), *agent_history(6)[2:]]
    cut = truncate_tool_results(
        history, max_chars=3_000, head_chars=1_000, tail_chars=1_000
    )
    assert "original 12,000 characters" in cut[1].content
    out = compress_old_tool_results(cut, batch=1)
    assert "[... 1,996 lines omitted, original 12,000 characters;" in out[1].content
    assert out[1].additional_kwargs[MARKER_KEY]["original_chars"] == 12_000


def test_compressed_form_is_three_head_lines_two_tail_lines_and_marker():
    body = lines(100)
    history = [ai(call("c0")), result("c0", body), *agent_history(6)[2:]]
    out = compress_old_tool_results(history, batch=1)
    text = out[1].content.splitlines()
    assert text[:3] == body.splitlines()[:3]
    assert text[-2:] == body.splitlines()[-2:]
    assert "95 lines omitted" in text[3]
    assert out[1].additional_kwargs[MARKER_KEY]["original_chars"] == len(body)
    assert out[0] is history[0]  # the call stays as it was


def test_results_at_or_below_min_chars_stay_whole():
    history = [ai(call("c0")), result("c0", "x" * 500), *agent_history(6)[2:]]
    assert compress_old_tool_results(history, batch=1) is history


@pytest.mark.parametrize("batch", [1, 4, 8])
def test_old_messages_change_only_every_batch_results(batch):
    """Byte-identical output while the history grows inside one batch."""
    full = agent_history(40)
    outputs = [
        compress_old_tool_results(full[: 2 + 2 * n], batch=batch) for n in range(7, 41)
    ]
    boundaries = 0
    for prev, cur in itertools.pairwise(outputs):
        compressed_prev = sum(
            1 for m in prev if (m.additional_kwargs.get(MARKER_KEY) or {}).get("kind")
        )
        compressed_cur = sum(
            1 for m in cur if (m.additional_kwargs.get(MARKER_KEY) or {}).get("kind")
        )
        if compressed_cur == compressed_prev:
            assert snapshot(cur[: len(prev)]) == snapshot(prev)
        else:
            assert compressed_cur - compressed_prev == batch
            boundaries += 1
    assert boundaries == (40 - 6) // batch - (7 - 6) // batch


def test_idempotent_input_unchanged_and_same_objects_each_call():
    history = agent_history(20)
    before = snapshot(history)
    once = compress_old_tool_results(history)
    assert snapshot(history) == before
    assert compress_old_tool_results(once) is once
    again = compress_old_tool_results(history)
    assert all(a is b for a, b in zip(once, again, strict=True))


def test_synthetic_results_are_not_compressed():
    synthetic = result(
        "c0", lines(100), additional_kwargs={MARKER_KEY: {"kind": "synthetic_result"}}
    )
    history = [ai(call("c0")), synthetic, *agent_history(6)[2:]]
    assert compress_old_tool_results(history, batch=1) is history


def test_assistant_text_is_compressed_with_its_result_and_its_calls_stay():
    thought = lines(40, prefix="thought")
    plain = AIMessage(lines(30, prefix="no command"), id="plain")
    history = [
        plain,
        ai(call("c0", command="sed -n 1,80p pkg/mod.py"), content=thought, id="a0"),
        result("c0", lines(100)),
        *agent_history(6)[2:],
    ]
    assert compress_old_tool_results(history, batch=1)[1] is history[1]  # default
    out = compress_old_tool_results(history, batch=1, assistant=True)
    for i in (0, 1):  # the caller, and the message before it that made no call
        mark = out[i].additional_kwargs[MARKER_KEY]
        assert mark["kind"] == "compressed"
        assert mark["original_chars"] == len(history[i].content)
        assert out[i].content.splitlines()[0] == history[i].content.splitlines()[0]
        assert "older assistant message compressed" in out[i].content
    assert out[1].tool_calls == history[1].tool_calls
    assert out[1].id == "a0"
    assert out[2].additional_kwargs[MARKER_KEY]["kind"] == "compressed"
    assert all(a is b for a, b in zip(out[3:], history[3:], strict=True))
    assert history[1].content == thought  # the caller's messages are not touched


def test_callers_are_the_assistant_messages_since_the_previous_result():
    history = [
        SystemMessage("s"),
        HumanMessage("task"),
        AIMessage("thinking aloud"),
        HumanMessage("please run a command"),
        ai(call("a"), call("b")),
        result("a"),
        result("b"),
        ai(call("c")),
        result("c"),
    ]
    assert callers(history, 5) == [2, 4]
    assert callers(history, 6) == []  # a second result of the same step
    assert callers(history, 8) == [7]


def test_assistant_blocks_keep_their_tool_use_and_reasoning_stays():
    text = lines(40, prefix="thought")
    use = {"type": "tool_use", "id": "c0", "name": "bash", "input": {"cmd": "ls"}}
    blocks = AIMessage([{"type": "text", "text": text}, use], tool_calls=[call("c0")])
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    signed = AIMessage([thinking, {"type": "text", "text": text}], id="signed")
    history = [blocks, result("c0", lines(100)), *agent_history(6)[2:]]
    out = compress_old_tool_results(history, batch=1, assistant=True)
    assert out[0].content[1] == use
    assert out[0].content[0]["text"].splitlines()[0] == text.splitlines()[0]
    assert out[0].tool_calls == blocks.tool_calls
    assert out[0].additional_kwargs[MARKER_KEY]["original_chars"] == len(text)
    history = [signed, ai(call("c1")), result("c1", lines(100)), *history[2:]]
    out = compress_old_tool_results(history, batch=1, assistant=True)
    assert out[0] is signed  # a signed reasoning block must go back unchanged


def test_a_joined_assistant_turn_is_not_compressed_again() -> None:
    # Hygiene joins consecutive assistant turns after compression has weighed
    # each; a prompt prepared again must not compress the joined one (a
    # hypothesis case of test_idempotent_and_deterministic did).
    joined = AIMessage(
        "\n".join(f"line {k}" for k in range(200)),
        id="a2",
        additional_kwargs={MARKER_KEY: {"kind": "merged", "ids": ["a1", "a2"]}},
    )
    assert compress_message(joined, 10, 1, 1) is joined
    plain = joined.model_copy(update={"additional_kwargs": {}})
    assert compress_message(plain, 10, 1, 1) is not plain
