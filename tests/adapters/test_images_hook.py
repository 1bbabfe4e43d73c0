"""Old images offloaded by the LangGraph hook and the LCEL step, as by middleware."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import (
    ConfigError,
    ResultArchive,
    as_runnable,
    make_image_reader,
    pre_model_hook,
)
from tests.adapters._support import make_guard
from tests.adapters.test_images import (
    POINTER,
    LooksBack,
    _urls,
    check_looked_back,
    png,
    screenshot,
)


def _screens(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Fix the layout.")]
    for k in range(n):
        image = {"type": "image_url", "image_url": {"url": png(k)}}
        out += [
            HumanMessage([{"type": "text", "text": f"Screen {k}:"}, image]),
            AIMessage(f"Noted {k}.", id=f"a{k}"),
        ]
    return out


def test_a_react_agent_hook_sends_the_newest_image_and_views_an_old_one_back(
    sqlite_store: SqliteStore,
) -> None:
    model = LooksBack()
    agent = create_react_agent(
        model,
        [screenshot, make_image_reader()],
        pre_model_hook=pre_model_hook(make_guard(), keep_images=1),
        checkpointer=InMemorySaver(),
        store=sqlite_store,
    )
    check_looked_back(agent, model, {"configurable": {"thread_id": "t"}})


def test_the_hook_archives_under_the_archives_prefix() -> None:
    store = InMemoryStore()
    archive = ResultArchive(store, namespace_prefix=("tenants", "{user_id}"))
    hook = pre_model_hook(make_guard(), keep_images=2, archive=archive)
    config: Any = {"configurable": {"thread_id": "t", "user_id": "ann"}}
    out = hook.invoke({"messages": _screens(4)}, config)
    sent = out["llm_input_messages"]
    keys = POINTER.findall(str([m.content for m in sent]))
    assert len(keys) == 2 and _urls(sent) == [png(2), png(3)]
    reader = make_image_reader(store, namespace_prefix=("tenants", "{user_id}"))
    viewed = reader.invoke({"key": keys[0]}, config=config)
    assert viewed[1] == {"type": "image_url", "image_url": {"url": png(0)}}
    stranger: Any = {"configurable": {"thread_id": "t", "user_id": "bob"}}
    assert "No offloaded image" in reader.invoke({"key": keys[0]}, config=stranger)


def test_persist_mode_keeps_images_no_store_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The persisting hook writes what it sends back to state: an image it could
    not archive must stay whole there, not become a pointer to nothing."""
    hook = pre_model_hook(make_guard(), mode="persist", keep_images=1)
    history = _screens(3)
    with caplog.at_level(logging.WARNING, logger="langchain_context_guard"):
        out = hook.invoke({"messages": history}, {"configurable": {"thread_id": "t"}})
    assert "not archived" in caplog.text and "sent whole" in caplog.text
    written = [m for m in out.get("messages", []) if isinstance(m, BaseMessage)]
    assert POINTER.findall(str([m.content for m in written])) == []
    assert _urls(history) == [png(0), png(1), png(2)]  # the caller's, unchanged

    archive = ResultArchive(InMemoryStore())
    hook = pre_model_hook(make_guard(), mode="persist", keep_images=1, archive=archive)
    out = hook.invoke({"messages": history}, {"configurable": {"thread_id": "t"}})
    written = [m for m in out["messages"] if isinstance(m, BaseMessage)]
    assert len(POINTER.findall(str([m.content for m in written]))) == 2  # archived


def test_an_lcel_step_offloads_to_its_store_per_conversation() -> None:
    store = InMemoryStore()
    step = as_runnable(make_guard(), keep_images=1, image_store=store)
    history = _screens(3)
    config: Any = {"configurable": {"thread_id": "t"}}
    sent = step.invoke(history, config)
    assert _urls(sent) == [png(2)]
    keys = POINTER.findall(str([m.content for m in sent]))
    assert len(keys) == 2
    assert _urls(history) == [png(0), png(1), png(2)]  # the input is not changed
    reader = make_image_reader(store)
    assert reader.invoke({"key": keys[1]}, config=config)[1]["image_url"] == {
        "url": png(1)
    }
    other = reader.invoke({"key": keys[1]}, config={"configurable": {"thread_id": "u"}})
    assert other == f"No offloaded image {keys[1]!r} in this conversation."


async def test_an_lcel_step_offloads_when_awaited() -> None:
    store = InMemoryStore()
    step = as_runnable(make_guard(), keep_images=0, image_store=store)
    sent = await step.ainvoke(_screens(2), {"configurable": {"thread_id": "t"}})
    assert _urls(sent) == []
    assert len(store.search(())) == 2


def test_an_archived_item_that_is_not_an_image_is_not_sent_back() -> None:
    store = InMemoryStore()
    config: Any = {"configurable": {"thread_id": "t"}}
    step = as_runnable(make_guard(), keep_images=0, image_store=store)
    key = POINTER.findall(str([m.content for m in step.invoke(_screens(1), config)]))
    (item,) = store.search(())
    store.put(item.namespace, key[0], {"block": "rm -rf /"})  # tampered
    reader = make_image_reader(store)
    assert "No offloaded image" in reader.invoke({"key": key[0]}, config=config)


@pytest.mark.parametrize("keep", [-1, True, 1.5])
def test_keep_images_must_be_a_count(keep: Any) -> None:
    with pytest.raises(ConfigError, match="keep_images must be 0 or more"):
        pre_model_hook(make_guard(), keep_images=keep)
    with pytest.raises(ConfigError, match="keep_images must be 0 or more"):
        as_runnable(make_guard(), keep_images=keep)
