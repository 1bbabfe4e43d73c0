"""``_messages``: the rewrite memo the passes share."""

from __future__ import annotations

import gc

from langchain_core.messages import BaseMessage, ToolMessage

from langchain_context_guard.engine._messages import memo_rewrite


def _tool(text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id="c1", id="t1")


def test_a_rewrite_is_built_once_per_key_and_the_same_object_comes_back():
    message = _tool("x" * 50)
    built: list[str] = []

    def short(m: BaseMessage) -> BaseMessage:
        built.append("short")
        return m.model_copy(update={"content": "x"})

    def same(m: BaseMessage) -> BaseMessage:
        built.append("same")
        return m

    first = memo_rewrite(message, ("test", 1), short)
    assert memo_rewrite(message, ("test", 1), short) is first
    assert memo_rewrite(message, ("test", 2), same) is message
    assert memo_rewrite(message, ("test", 2), same) is message
    assert memo_rewrite(message, ("test", 1), short) is first
    assert built == ["short", "same"]
    assert first.content == "x" and message.content == "x" * 50


def test_a_content_replaced_in_place_is_rewritten_again():
    message = _tool("old text")
    first = memo_rewrite(
        message,
        "upper",
        lambda m: m.model_copy(update={"content": str(m.content).upper()}),
    )
    message.content = "new text"
    second = memo_rewrite(
        message,
        "upper",
        lambda m: m.model_copy(update={"content": str(m.content).upper()}),
    )
    assert first.content == "OLD TEXT" and second.content == "NEW TEXT"


def test_an_unchanged_message_is_not_kept_alive_by_the_memo():
    message = _tool("kept as it is")
    assert memo_rewrite(message, "none", lambda m: m) is message
    import weakref

    ref = weakref.ref(message)
    del message
    gc.collect()
    assert ref() is None


def test_the_sweep_drops_a_rewrite_and_the_rewrites_made_of_it():
    from langchain_context_guard.engine import _messages

    message = _tool("original")
    first = memo_rewrite(
        message, "one", lambda m: m.model_copy(update={"content": "a"})
    )
    memo_rewrite(first, "two", lambda m: m.model_copy(update={"content": "b"}))
    ids = {id(message), id(first)}
    assert ids <= set(_messages._rewrites)
    del message, first
    gc.collect()
    _messages.sweep_memo()
    assert not ids & set(_messages._rewrites)
