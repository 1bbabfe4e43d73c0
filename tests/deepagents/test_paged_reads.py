"""A ``read_file`` result the guard cuts at 16k: its marker leads back to the lines.

deepagents keeps the file in its state and its ``read_file`` takes ``offset`` and
``limit``, so the marker of a cut read names the lines cut and the call that
reads them. The scripted model here does what the marker says, and can only
answer from the lines the first read lost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import Field

from langchain_context_guard import ContextGuardMiddleware, guarded_subagents
from tests.fakes import ScriptedChatModel

pytest.importorskip("deepagents")
PATH = "/src/checksum.py"
LINES = 100
SECRET_AT = 50
SECRET = "MODULUS = 65519  # the prime the checksum really uses"
QUESTION = "Which modulus does the checksum use?"
POINTER = re.compile(r"read_file\(offset=(\d+), limit=(\d+)\) with the same file_path")


def source() -> str:
    """A file whose line ``SECRET_AT`` alone holds the answer."""
    return "\n".join(
        SECRET
        if i == SECRET_AT
        else f"def check_{i}(v): return (v * {i * i + 7}) % 65521  # crc={i * 7919:08x}"
        for i in range(1, LINES + 1)
    )


def _read(ident: str, **window: int) -> AIMessage:
    args = {"file_path": PATH, **window}
    return AIMessage("", tool_calls=[{"name": "read_file", "args": args, "id": ident}])


class MarkerReader(ScriptedChatModel):
    """Reads the file, follows the cut marker's ``read_file`` call, then answers.

    With ``delegate``, the main agent (the one with ``task``) hands the question
    to the general-purpose sub-agent, which reads, and answers with its report.
    """

    delegate: bool = False
    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> MarkerReader:
        self.bound = [getattr(t, "name", "") for t in tools]
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if self.delegate and "task" in self.bound:
            if results:
                return AIMessage(results[-1].text)
            args = {"description": QUESTION, "subagent_type": "general-purpose"}
            call = {"name": "task", "args": args, "id": "task_0"}
            return AIMessage("", tool_calls=[call])
        if not results:
            return _read("read_0")
        if any(SECRET in m.text for m in results):
            return AIMessage(SECRET)
        pointer = POINTER.search(results[-1].text)
        if pointer is None or len(results) > 4:
            return AIMessage("The modulus is not in what I was shown.")
        offset, limit = map(int, pointer.groups())
        return _read(f"read_{len(results)}", offset=offset, limit=limit)


@pytest.mark.parametrize("delegate", [False, True], ids=["main", "sub-agent"])
def test_the_model_reads_the_lines_a_cut_read_lost(delegate: bool) -> None:
    from deepagents import create_deep_agent
    from deepagents.backends.utils import create_file_data

    model = MarkerReader(profile={"max_input_tokens": 16_000}, delegate=delegate)
    agent = create_deep_agent(
        model, middleware=[ContextGuardMiddleware()], subagents=guarded_subagents()
    )
    files = {PATH: create_file_data(source())}
    state = agent.invoke({"messages": [HumanMessage(QUESTION)], "files": files})
    first_read = next(
        m for sent in model.received for m in sent if isinstance(m, ToolMessage)
    )
    assert SECRET not in first_read.text  # the guard cut it out of the first read
    if "@@ lines " not in first_read.text:
        pytest.skip(
            "this deepagents' read_file writes no '@@ lines A-B of T @@' header "
            "(deepagents 0.7.13 numbers each row): the marker has no lines to name"
        )
    pointer = POINTER.search(first_read.text)
    assert pointer is not None
    offset, limit = map(int, pointer.groups())
    assert offset < SECRET_AT <= offset + limit
    assert state["messages"][-1].text == SECRET
