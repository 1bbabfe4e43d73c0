from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard import MARKER_KEY, TiktokenCounter, truncate_tool_results
from langchain_context_guard.engine import result_key, result_ordinals
from tests.engine._support import ai, call, result, snapshot


def test_nothing_to_do_returns_the_same_list():
    history = [HumanMessage("hi"), ai(call("c1")), result("c1", "x" * 50_000)]
    assert truncate_tool_results(history) is history


def test_oversized_result_gets_head_tail_and_marker():
    big = "H" * 2_000 + "M" * 60_000 + "T" * 2_000
    history = [ai(call("c1")), result("c1", big, id="t1")]
    before = snapshot(history)
    out = truncate_tool_results(history)
    assert snapshot(history) == before
    cut = out[1]
    assert cut.id == "t1"
    assert cut.content.startswith("H" * 2_000)
    assert cut.content.endswith("T" * 2_000)
    assert "60,000 characters truncated; original 64,000" in cut.content
    assert cut.additional_kwargs[MARKER_KEY] == {
        "kind": "truncated",
        "original_chars": 64_000,
        "original_lines": 1,
    }
    assert out[0] is history[0]


def test_a_cut_cut_again_names_the_first_original():
    big = "line\n" * 12_800  # 64,000 characters
    history = [ai(call("c1")), result("c1", big, id="t1")]
    once = truncate_tool_results(history, max_chars=8_000)
    twice = truncate_tool_results(once, max_chars=2_000, head_chars=500, tail_chars=500)
    assert len(twice[1].content) <= 2_000
    assert "; original 64,000 characters" in twice[1].content
    assert "; original 8,000" not in twice[1].content
    mark = twice[1].additional_kwargs[MARKER_KEY]
    assert (mark["original_chars"], mark["original_lines"]) == (64_000, 12_801)


def test_list_content_text_blocks_are_cut():
    blocks = [
        {"type": "text", "text": "a" * 60_000},
        {"type": "image_url", "image_url": {"url": "data:x"}},
    ]
    out = truncate_tool_results([result("c", blocks)])
    assert len(out[0].content[0]["text"]) < 5_000
    assert out[0].content[1] == blocks[1]


def test_share_of_window_caps_results_under_max_chars():
    counter = TiktokenCounter()
    text = " ".join(f"w{i}" for i in range(8_000))  # < 50k chars, ~16k tokens
    out = truncate_tool_results(
        [result("c", text)], max_tokens=2_000, token_counter=counter.count_message
    )
    assert counter.count_message(out[0]) <= 2_000


def test_max_message_chars_applies_to_every_non_system_message():
    history = [SystemMessage("s" * 500), HumanMessage("u" * 500), AIMessage("a" * 500)]
    out = truncate_tool_results(history, max_message_chars=300, max_chars=50_000)
    assert out[0] is history[0]
    assert len(out[1].content) <= 300
    assert len(out[2].content) <= 300


def test_idempotent_and_deterministic():
    history = [ai(call("c1")), result("c1", "x" * 100_000)]
    once = truncate_tool_results(history)
    assert truncate_tool_results(once) is once
    assert snapshot(truncate_tool_results(history)) == snapshot(once)


def test_same_history_gives_the_same_rewritten_object():
    history = [ai(call("c1")), result("c1", "x" * 100_000)]
    assert truncate_tool_results(history)[1] is truncate_tool_results(history)[1]


def test_archived_results_markers_name_the_key_and_fit_the_budget():
    from langchain_context_guard import ContextGuard, GuardPolicy
    from langchain_context_guard.engine._messages import marker
    from tests.engine._support import agent_history

    history = agent_history(30, result_chars=9_000)
    for archived in (False, True):
        policy = GuardPolicy(
            context_window=16_000,
            reserve_tokens=2_000,
            warn_below_tokens=8_000,
            max_tool_result_chars=6_000,
            archived_results=archived,
        )
        guard = ContextGuard(policy)
        out = guard.prepare(history)
        assert guard.count_tokens(out.messages) <= policy.budget(16_000)
        cut = [m for m in out.messages if m.type == "tool" and marker(m)]
        named = [m for m in out.messages if "read_tool_result(" in m.text]
        if archived:
            assert named and len(named) == len(cut)
            places = result_ordinals(history)
            for m in named:
                key = result_key(places[m.tool_call_id])
                assert f'read_tool_result("{key}")' in m.text
        else:
            assert not named


IMAGE = {
    "type": "image",
    "source_type": "base64",
    "data": "aGVsbG8=",
    "mime_type": "image/png",
}


def _screenshots() -> list:
    text = "".join(f"line {i}: some log output here\n" for i in range(3_000))
    return [
        HumanMessage("go"),
        ai(call("c1")),
        result("c1", [IMAGE, {"type": "text", "text": text}, IMAGE]),
        HumanMessage("next"),
    ]


def _text_block(message) -> str:
    [block] = [b for b in message.content if b.get("type") == "text"]
    return block["text"]


def test_images_over_the_share_leave_the_text_a_head_and_a_tail():
    from langchain_context_guard import ContextGuard, GuardPolicy

    policy = GuardPolicy(
        context_window=32_000, reserve_tokens=4_000, max_tool_result_share=0.1
    )
    history = _screenshots()
    counter = TiktokenCounter()
    share = int(policy.max_tool_result_share * policy.budget(32_000))
    assert counter.count_message(HumanMessage([IMAGE, IMAGE])) > share
    passed = truncate_tool_results(
        history, max_tokens=share, token_counter=counter.count_message
    )
    prepared = ContextGuard(policy).prepare(history).messages
    for out in (passed, prepared):
        text = _text_block(out[2])
        assert text.startswith("line 0: some log output here\nline 1: some log")
        assert text.endswith("line 2999: some log output here\n")
        assert text.count("characters truncated") == 1
        assert [b["type"] for b in out[2].content] == ["image", "text", "image"]
    again = truncate_tool_results(
        passed, max_tokens=share, token_counter=counter.count_message
    )
    assert again is passed
    assert ContextGuard(policy).prepare(prepared).messages == prepared
