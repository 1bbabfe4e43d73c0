"""Load agent transcripts from disk as LangChain messages.

Supports mini-swe-agent ``.traj.json`` trajectories, OpenAI-format chat messages (a
JSON list, a ``{"messages": [...]}`` object or JSONL) and LangChain message dicts as
written by ``messages_to_dict``. Every parse problem raises :class:`TranscriptError`
naming the file, the line (1-based) or message index (0-based), and what was
expected.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    messages_from_dict,
)
from langchain_core.messages.ai import (
    InputTokenDetails,
    OutputTokenDetails,
    UsageMetadata,
)
from pydantic import ValidationError

from ..engine import app_message

__all__ = [
    "TRAJECTORIES_ENV_VAR",
    "TranscriptError",
    "load_trajectories",
    "load_transcript",
    "provider_prompt_tokens",
    "shared_multitool_dir",
    "shared_trajectory_dir",
    "trajectory_to_messages",
]

TRAJECTORIES_ENV_VAR = "CONTEXT_GUARD_TRAJECTORIES"

# The action regex of mini-swe-agent 1.x: a reply is an action only if it has
# exactly one such block; otherwise the harness answers with a format error, a
# user message its code wrote (``app_message``), not a person's reply.
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_TRAJ_ROLES = ("system", "user", "assistant")
_CHAT_ROLES = frozenset(
    {"system", "developer", "user", "human", "assistant", "ai", "tool", "function"}
)
_LC_TYPES = frozenset({"system", "human", "ai", "tool", "function", "chat"})
_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})


class TranscriptError(ValueError):
    """A transcript file or trajectory could not be read or understood."""


def _bash_command(content: str) -> str | None:
    """Return the command of the single ```bash block in ``content``, else None."""
    blocks = _BASH_BLOCK.findall(content)
    return blocks[0].strip() if len(blocks) == 1 else None


def _usage(usage: Mapping[str, Any]) -> UsageMetadata:
    """Build LangChain usage metadata from an OpenAI-style ``usage`` dict."""
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    inputs = InputTokenDetails()
    outputs = OutputTokenDetails()
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    if reasoning is not None:
        outputs["reasoning"] = int(reasoning)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        inputs["cache_read"] = int(cached)
    return UsageMetadata(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=prompt + completion,
        input_token_details=inputs,
        output_token_details=outputs,
    )


def _assistant(k: int, content: str, extra: object) -> AIMessage:
    """Convert the assistant message at index ``k`` of a trajectory."""
    response = extra.get("response") if isinstance(extra, Mapping) else None
    usage = response.get("usage") if isinstance(response, Mapping) else None
    kwargs: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if isinstance(usage, Mapping):
        kwargs["usage_metadata"] = _usage(usage)
        if usage.get("prompt_tokens") is not None:
            meta["prompt_tokens"] = int(usage["prompt_tokens"])
    created = response.get("created") if isinstance(response, Mapping) else None
    if type(created) in (int, float):
        meta["created"] = created  # when the call was answered (the replay's clock)
    if meta:
        kwargs["response_metadata"] = meta
    command = _bash_command(content)
    if command is not None:
        call = {"name": "bash", "args": {"command": command}, "id": f"call_{k}"}
        kwargs["tool_calls"] = [call]
    return AIMessage(content=content, id=f"m{k}", **kwargs)


def trajectory_to_messages(data: Mapping[str, Any]) -> list[BaseMessage]:
    """Convert a mini-swe-agent trajectory dict into tool-calling LangChain messages.

    An assistant message with one bash block makes a call, answered by the next
    user message; the user message after one that made none is the harness's
    format error, marked as the application's own (``app_message``).
    """
    raw = data.get("messages")
    if not isinstance(raw, list):
        raise TranscriptError("expected a 'messages' list in the trajectory")
    out: list[BaseMessage] = []
    pending: str | None = None  # tool call id awaiting its result
    for k, item in enumerate(raw):
        where = f"message {k}"
        if not isinstance(item, Mapping):
            raise TranscriptError(f"{where}: expected a message object")
        role, content = item.get("role"), item.get("content")
        if role not in _TRAJ_ROLES:
            hint = ", ".join(_TRAJ_ROLES)
            raise TranscriptError(f"{where}: unknown role {role!r}; expected {hint}")
        if not isinstance(content, str):
            raise TranscriptError(f"{where}: expected string 'content'")
        if role == "system":
            out.append(SystemMessage(content=content, id=f"m{k}"))
        elif role == "assistant":
            ai = _assistant(k, content, item.get("extra"))
            out.append(ai)
            pending = ai.tool_calls[0]["id"] if ai.tool_calls else None
            continue
        elif pending is not None:
            out.append(
                ToolMessage(
                    content=content, tool_call_id=pending, name="bash", id=f"m{k}"
                )
            )
        elif out and isinstance(out[-1], AIMessage):
            out.append(app_message(HumanMessage(content=content, id=f"m{k}")))
        else:
            out.append(HumanMessage(content=content, id=f"m{k}"))
        pending = None
    return out


def _brief(exc: Exception) -> str:
    """Summarise a conversion exception in one line."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(part) for part in err["loc"])
        return f"{loc}: {err['msg']}" if loc else str(err["msg"])
    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _check_kind(item: dict[str, Any], where: str) -> tuple[str, bool]:
    """Validate the role/type of a message dict; return it and whether it is LC."""
    if isinstance(item.get("data"), dict) and "type" in item:
        kind, allowed, key = item["type"], _LC_TYPES, "type"
    else:
        kind, allowed, key = item.get("role", item.get("type")), _CHAT_ROLES, "role"
    hint = "expected one of " + ", ".join(sorted(allowed))
    if kind is None:
        raise TranscriptError(f"{where}: missing 'role'; {hint}")
    if kind not in allowed:
        raise TranscriptError(f"{where}: unknown {key} {kind!r}; {hint}")
    return str(kind), allowed is _LC_TYPES


def _convert_one(item: object, where: str) -> BaseMessage:
    """Convert one OpenAI-style or LangChain message dict; ``where`` locates it."""
    if not isinstance(item, dict):
        kind = type(item).__name__
        raise TranscriptError(f"{where}: expected a message object, got {kind}")
    role, is_lc = _check_kind(item, where)
    _check_calls(item.get("data", {}) if is_lc else item, where)
    if not is_lc and "content" not in item:
        if not item.get("tool_calls"):
            raise TranscriptError(f"{where}: missing 'content' in {role} message")
        item = {**item, "content": ""}
    try:
        if is_lc:
            return messages_from_dict([item])[0]
        return convert_to_messages([item])[0]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise TranscriptError(
            f"{where}: invalid {role} message ({_brief(exc)})"
        ) from exc


def _check_calls(item: Mapping[str, Any], where: str) -> None:
    """Refuse ``tool_calls`` that are not a list of objects (one per call)."""
    calls = item.get("tool_calls") if isinstance(item, Mapping) else None
    if calls is None:
        return
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        shown = repr(calls)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TranscriptError(
            f"{where}: 'tool_calls' must be a list of objects (each with an id "
            f"and the function's name and arguments), got {shown}"
        )


def _from_json(value: object, name: str) -> list[BaseMessage]:
    """Convert a decoded JSON document into messages."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        if "trajectory_format" in value or "info" in value:
            try:
                return trajectory_to_messages(value)
            except TranscriptError as exc:
                raise TranscriptError(f"{name} {exc}") from None
        value = value["messages"]
    elif isinstance(value, dict) and ("role" in value or "type" in value):
        value = [value]
    if not isinstance(value, list):
        raise TranscriptError(
            f"{name}: expected a list of messages or an object with a 'messages' list"
        )
    if not value:
        raise TranscriptError(f"{name}: no messages; expected at least one message")
    return [_convert_one(item, f"{name} message {i}") for i, item in enumerate(value)]


def _from_jsonl(text: str, name: str) -> list[BaseMessage]:
    """Convert JSONL text (one message object per line) into messages."""
    out: list[BaseMessage] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{name} line {lineno}: invalid JSON ({exc.msg}); "
                "expected one message object per line"
            ) from None
        out.append(_convert_one(item, f"{name} line {lineno}"))
    return out


def load_transcript(path: str | Path) -> list[BaseMessage]:
    """Load a transcript file, auto-detecting its format."""
    path = Path(path)
    name = path.name or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{name}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise TranscriptError(f"{name}: cannot read file ({reason})") from None
    if not text.strip():
        raise TranscriptError(
            f"{name}: empty file; expected a JSON or JSONL transcript"
        )
    if path.suffix.lower() in _JSONL_SUFFIXES:
        return _from_jsonl(text, name)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several JSON values: treat as JSONL
            return _from_jsonl(text, name)
        raise TranscriptError(
            f"{name} line {exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno}); "
            "expected a JSON transcript or one message object per line"
        ) from None
    return _from_json(value, name)


def load_trajectories(directory: str | Path) -> dict[str, list[BaseMessage]]:
    """Load every ``*.traj.json`` in ``directory``, keyed by instance id, by name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TranscriptError(f"{directory}: not a directory of .traj.json files")
    files = sorted(directory.glob("*.traj.json"), key=lambda p: p.name)
    return {p.name.removesuffix(".traj.json"): load_transcript(p) for p in files}


def provider_prompt_tokens(messages: Sequence[BaseMessage]) -> list[tuple[int, int]]:
    """Return ``(index, provider prompt tokens)`` for each AI message that has them."""
    return [
        (k, int(m.response_metadata["prompt_tokens"]))
        for k, m in enumerate(messages)
        if isinstance(m, AIMessage) and "prompt_tokens" in m.response_metadata
    ]


def shared_trajectory_dir() -> Path | None:
    """Locate the shared SWE trajectory directory, or return None if absent."""
    env = os.environ.get(TRAJECTORIES_ENV_VAR)
    if env:
        candidate = Path(env).expanduser()
    else:
        repo_root = Path(__file__).resolve().parents[2]  # replay/ -> package -> repo
        candidate = repo_root.parent / "shared" / "data" / "swe-trajectories"
    return candidate if candidate.is_dir() else None


def load_paths(paths: Sequence[str | Path]) -> dict[str, list[BaseMessage]]:
    """Load transcripts from files and directories, keyed by file name.

    A directory holding ``.traj.json`` files gives those; any other gives its
    ``.json`` and ``.jsonl`` transcripts (message dumps such as the shared
    multi-tool corpus), by name, less an ``index.json`` listing them.
    """
    out: dict[str, list[BaseMessage]] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and any(path.glob("*.traj.json")):
            out.update(load_trajectories(path))
        elif path.is_dir():
            found = sorted(
                (p for p in path.iterdir() if p.suffix in {".json", ".jsonl"}),
                key=lambda p: p.name,
            )
            out.update(load_paths([p for p in found if p.name != "index.json"]))
        else:
            out[path.name.removesuffix(".json").removesuffix(".traj")] = (
                load_transcript(path)
            )
    return out


def shared_multitool_dir() -> Path | None:
    """Locate the shared multi-tool transcripts (message dumps), or None."""
    trajectories = shared_trajectory_dir()
    root = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if trajectories is not None:
        root = trajectories.parent
    candidate = root / "multitool"
    return candidate if candidate.is_dir() else None
