"""examples/server under ``langgraph dev``: a 50-step thread through langgraph-sdk.

The example is copied to a temporary directory (the dev server writes its
state next to ``langgraph.json``) and served on 127.0.0.1 at a free port, no
browser, no reload, tracing off. Its scripted model appends every input it
receives to a file, which the test checks: within budget, tool calls paired,
and accepted by the OpenAI, Anthropic and Gemini request builders.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import messages_from_dict
from langgraph_sdk import get_sync_client

from langchain_context_guard import MARKER_KEY, count_messages
from langchain_context_guard.engine.tokens._counters import TiktokenCounter
from tests.fakes import pairing_errors
from tests.providers._support import violations

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "server"
BUDGET = 16_000 - 2_000  # agent.py: WINDOW, reserve_tokens


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    project = tmp_path / "server"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".langgraph_api"))
    record = tmp_path / "inputs.jsonl"
    port = _free_port()
    env = {
        **os.environ,
        "CONTEXT_GUARD_RECORD": str(record),
        "CONTEXT_GUARD_OFFLINE": "1",
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    env.pop("MODEL", None)
    cli = Path(sys.executable).with_name("langgraph")
    args = [str(cli), "dev", "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [*args, "--no-browser", "--no-reload"],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                raise AssertionError(
                    "langgraph dev did not start:\n"
                    + (tmp_path / "server.log").read_text()[-3000:]
                )
            time.sleep(0.5)
        yield url, record
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_fifty_step_thread_stays_in_budget_with_valid_pairs(
    server: tuple[str, Path],
) -> None:
    url, record = server
    with get_sync_client(url=url) as client:
        thread = client.threads.create()
        state = client.runs.wait(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": "Read all chunks."}]},
            config={"recursion_limit": 200},
        )
    assert isinstance(state, dict)
    assert state["messages"][-1]["content"] == "Read 50 chunks."
    # The middleware prunes what is sent, never the thread's stored history.
    assert sum(m["type"] == "tool" for m in state["messages"]) == 50
    inputs = [
        messages_from_dict(json.loads(line)) for line in record.read_text().splitlines()
    ]
    assert len(inputs) == 51
    counter = TiktokenCounter()
    sizes = [count_messages(sent, counter) for sent in inputs]
    assert max(sizes) <= BUDGET
    # The thread outgrew the budget: what was sent is the guard's work.
    stored = messages_from_dict(
        [{"type": m["type"], "data": m} for m in state["messages"]]
    )
    assert count_messages(stored, counter) > 2 * BUDGET
    assert any(MARKER_KEY in m.additional_kwargs for m in inputs[-1])
    for sent in inputs:
        assert pairing_errors(sent) == []
        assert violations(sent) == {}
