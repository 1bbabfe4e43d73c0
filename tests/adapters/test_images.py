"""Old images offloaded for an agent: pointers sent, images archived, viewed back."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import (
    ConfigError,
    ContextGuardMiddleware,
    ImageOffloadMiddleware,
    make_image_reader,
    offload_old_images,
)
from tests.adapters._support import make_guard
from tests.fakes import ScriptedChatModel, pairing_errors
from tests.providers._support import anthropic_payload, openai_payload

SHOTS = 3
POINTER = re.compile(r'view_image\("(img_[0-9a-f]{16})"\)')


def png(k: int) -> str:
    return f"data:image/png;base64,iVBORw0KGgo{k:04d}"


@tool(response_format="content")
def screenshot(k: int) -> list[dict[str, Any]]:
    """Take screenshot number k of the screen."""
    return [
        {"type": "text", "text": f"Screenshot {k}"},
        {"type": "image_url", "image_url": {"url": png(k)}},
    ]


class LooksBack(ScriptedChatModel):
    """Takes ``SHOTS`` screenshots, then views the first one again by its pointer."""

    n: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> LooksBack:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n, self.n = self.n, self.n + 1
        if n < SHOTS:
            call = {"name": "screenshot", "args": {"k": n}, "id": f"s{n}"}
            return AIMessage("", tool_calls=[call], id=f"ai{n}")
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.tool_call_id == "back":
            return AIMessage("Seen again.", id="final")
        found = POINTER.search("\n".join(str(m.content) for m in messages))
        if found is None:
            return AIMessage("no pointer", id="final")
        call = {"name": "view_image", "args": {"key": found.group(1)}, "id": "back"}
        return AIMessage("", tool_calls=[call], id="ask")


def _urls(messages: list[BaseMessage]) -> list[str]:
    return re.findall(r"data:image/png;base64,iVBORw0KGgo\d{4}", str(messages))


def test_an_agent_sends_the_newest_image_and_views_an_old_one_back(
    sqlite_store: SqliteStore,
) -> None:
    check_images_offloaded_and_viewed(sqlite_store)


def check_images_offloaded_and_viewed(store: Any) -> None:
    """An agent on ``store`` sends the newest image whole and views an old one back."""
    model = LooksBack()
    agent = create_agent(
        model,
        [screenshot, make_image_reader()],
        middleware=[
            ImageOffloadMiddleware(keep=1),
            ContextGuardMiddleware(make_guard()),
        ],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    asked, keys = check_looked_back(agent, model, config)
    for payload in (openai_payload, anthropic_payload):  # the builders take it
        body = json.dumps(payload(asked)).replace('\\"', '"')
        assert POINTER.findall(body) == keys

    other = make_image_reader(store).invoke(
        {"key": keys[0]}, config={"configurable": {"thread_id": "u"}}
    )
    assert other == f"No offloaded image {keys[0]!r} in this conversation."


def check_looked_back(
    agent: Any, model: LooksBack, config: Any
) -> tuple[list[BaseMessage], list[str]]:
    """Run ``agent`` on ``model``'s script: the newest image only is sent, the
    state keeps every image, an old one is viewed back. The prompt and its keys."""
    agent.invoke({"messages": [("user", "Look at the screen.")]}, config)
    asked = model.received[SHOTS]
    assert _urls(asked) == [png(SHOTS - 1)]  # only the newest image is sent
    keys = POINTER.findall(str([m.content for m in asked]))
    assert len(keys) == SHOTS - 1
    state = agent.get_state(config).values["messages"]
    assert _urls(state[: 2 * SHOTS + 1]) == [png(k) for k in range(SHOTS)]  # kept
    back = next(m for m in state if getattr(m, "tool_call_id", "") == "back")
    assert back.content[1] == {"type": "image_url", "image_url": {"url": png(0)}}
    assert state[-1].content == "Seen again."
    assert pairing_errors(model.received[-1]) == []
    return asked, keys


def _history() -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Fix the layout.")]
    for k in range(4):
        image = {"type": "image_url", "image_url": {"url": png(k)}}
        out += [
            HumanMessage([{"type": "text", "text": f"Screen {k}:"}, image]),
            AIMessage(f"Noted {k}."),
        ]
    return out


@pytest.mark.parametrize(
    "payload", [openai_payload, anthropic_payload], ids=["openai", "anthropic"]
)
def test_providers_request_builders_take_the_offloaded_history(payload: Any) -> None:
    sent = offload_old_images(_history(), 2)
    body = json.dumps(payload(sent)).replace('\\"', '"')
    assert re.findall(r"iVBORw0KGgo\d{4}", body) == [
        "iVBORw0KGgo0002",
        "iVBORw0KGgo0003",
    ]
    assert len(POINTER.findall(body)) == 2


def test_keep_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="keep must be 0 or more"):
        ImageOffloadMiddleware(keep=-1)
