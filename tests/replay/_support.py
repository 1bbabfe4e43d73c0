"""Test helpers for the replay: small synthetic mini-swe-agent trajectories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_context_guard.replay._transcripts import (
    shared_trajectory_dir,
    trajectory_to_messages,
)

SHARED = shared_trajectory_dir()
SYSTEM = "You are a coding agent. Reply with one bash block per turn."


def _output(step: int, lines: int) -> str:
    body = "\n".join(
        f"{100 + i}:    def helper_{step}_{i}(self): return module_{step}.value_{i}"
        for i in range(lines)
    )
    return f"<returncode>0</returncode>\n<output>\n{body}\n</output>"


def trajectory(steps: int = 24, lines: int = 120, ratio: float = 1.1) -> dict[str, Any]:
    """A trajectory dict in mini-swe-agent's format, with provider usage.

    Each step greps a different file (``pkg/mod_<k>.py``) and every fourth step
    reads back the file of an earlier one, so its action reuses old evidence.
    ``prompt_tokens`` is ``ratio`` times the tiktoken size of the prompt.
    """
    from langchain_context_guard import TiktokenCounter

    counter = TiktokenCounter()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Fix the bug in pkg/core.py where parse_value fails.",
        },
    ]
    for k in range(steps):
        target = k - 3 if k % 4 == 3 else k
        command = f"grep -n helper_{target} pkg/mod_{target}.py"
        prompt = trajectory_to_messages({"messages": messages})
        size = sum(counter.count_message(m) for m in prompt) + 3
        messages.append(
            {
                "role": "assistant",
                "content": f"THOUGHT: look at mod_{target}.\n\n```bash\n{command}\n```",
                "extra": {
                    "response": {
                        "usage": {
                            "prompt_tokens": round(size * ratio),
                            "completion_tokens": 40,
                        }
                    }
                },
            }
        )
        messages.append({"role": "user", "content": _output(k, lines)})
    return {"messages": messages, "info": {"exit_status": "Submitted"}}


def transcripts(n: int = 2, **kwargs: Any) -> dict[str, list[BaseMessage]]:
    """``n`` synthetic transcripts as LangChain messages."""
    return {
        f"synthetic-{i}": trajectory_to_messages(trajectory(steps=20 + 4 * i, **kwargs))
        for i in range(n)
    }


def write_trajectories(directory: Path, n: int = 2) -> Path:
    """Write ``n`` synthetic ``.traj.json`` files into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        data = trajectory(steps=20 + 4 * i)
        (directory / f"synthetic-{i}.traj.json").write_text(json.dumps(data))
    return directory
