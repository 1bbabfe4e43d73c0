"""Provider request builders as the judge of what the guard sends.

``payloads`` turns messages into the request body each chat model would POST
(no network: ``_get_request_payload`` / ``_prepare_request``), and the
``*_violations`` checkers hold each body to its provider's documented rules:

- OpenAI (Chat Completions, "function calling"): an assistant message with
  ``tool_calls`` must be followed by a ``tool`` message for each call id before
  any other role; a ``tool`` message must answer such a call.
- Anthropic (Messages API, "tool use" and "messages"): the first message is
  from the user; roles alternate; each ``tool_use`` is answered by a
  ``tool_result`` with its id in the next message, a user message whose
  ``tool_result`` blocks come first; no ``tool_result`` without its
  ``tool_use``; no empty content and no empty text blocks.
- Gemini (``generateContent``, "function calling"): a function-call turn comes
  right after a user turn or a function-response turn, and the next turn answers
  it with as many function responses; no empty parts or empty text.
- OpenAI Responses ("reasoning", "function calling"): a ``reasoning`` item is
  followed by an item produced with it; a ``message`` or ``function_call`` item
  that keeps its id has its reasoning item before it; every ``function_call`` is
  answered by one ``function_call_output`` with its ``call_id``, and no output
  comes without its call. Items of one reply share the suffix of their ids
  (``rs_a3``, ``msg_a3``, ``fc_a3-0``), as the generated histories name them.

``histories`` is a hypothesis strategy of messy agent histories (orphans,
duplicates, invalid tool calls, empty content, thinking blocks, an assistant
first).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

Payload = dict[str, Any]


@functools.cache
def _openai() -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4.1", api_key="x")  # type: ignore[arg-type]


@functools.cache
def _anthropic() -> Any:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model="claude-sonnet-4-5", api_key="x")  # type: ignore[arg-type]


@functools.cache
def _gemini() -> Any:
    from langchain_google_genai import ChatGoogleGenerativeAI

    return ChatGoogleGenerativeAI(model="gemini-2.5-pro", api_key="x")


@functools.cache
def _responses() -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="o4-mini", api_key="x", use_responses_api=True, output_version="v0"
    )  # type: ignore[arg-type]


def responses_payload(messages: Sequence[BaseMessage]) -> Payload:
    """The Responses API body ``ChatOpenAI(use_responses_api=True)`` would send."""
    return dict(_responses()._get_request_payload(list(messages)))


def _reply_of(item_id: str) -> str:
    """The reply an item id names: ``a3`` of ``rs_a3``, ``msg_a3``, ``fc_a3-0``."""
    return item_id.partition("_")[2].partition("-")[0]


def responses_violations(payload: Payload) -> list[str]:
    """Breaches of the Responses API's reasoning and function-call rules."""
    out: list[str] = []
    items = payload["input"]
    seen: set[str] = set()
    open_calls: list[str] = []
    for i, item in enumerate(items):
        kind, item_id = item.get("type"), str(item.get("id") or "")
        if kind == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else {}
            if _reply_of(str(nxt.get("id") or "")) != _reply_of(item_id):
                out.append(f"[{i}] {item_id}: reasoning without its following item")
            seen.add(_reply_of(item_id))
        elif item_id[:4] in {"msg_", "fc_a"} and _reply_of(item_id) not in seen:
            out.append(f"[{i}] {item_id}: without its required reasoning item")
        if kind == "function_call":
            if item["call_id"] in open_calls:
                out.append(f"[{i}] call {item['call_id']} made twice")
            open_calls.append(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in open_calls:
                out.append(f"[{i}] output for no call {item['call_id']}")
            else:
                open_calls.remove(item["call_id"])
    out += [f"[end] no output for call {c}" for c in open_calls]
    return out


def openai_payload(messages: Sequence[BaseMessage]) -> Payload:
    """The Chat Completions body ``ChatOpenAI`` would send."""
    return dict(_openai()._get_request_payload(list(messages)))


def anthropic_payload(messages: Sequence[BaseMessage], **kwargs: Any) -> Payload:
    """The Messages API body ``ChatAnthropic`` would send."""
    return dict(_anthropic()._get_request_payload(list(messages), **kwargs))


def gemini_payload(messages: Sequence[BaseMessage]) -> Payload:
    """The ``generateContent`` request ``ChatGoogleGenerativeAI`` would send."""
    return dict(_gemini()._prepare_request(list(messages)))


# -- OpenAI ---------------------------------------------------------------------


def openai_violations(payload: Payload) -> list[str]:
    """Breaches of OpenAI's tool-message ordering rules in one request body."""
    out: list[str] = []
    messages = payload["messages"]
    open_ids: list[str] = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "tool":
            if m["tool_call_id"] not in open_ids:
                out.append(f"[{i}] tool message {m['tool_call_id']!r} answers no call")
            else:
                open_ids.remove(m["tool_call_id"])
            continue
        if open_ids:
            out.append(f"[{i}] {role} message before the results of {open_ids}")
            open_ids = []
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and not m.get("content"):
                out.append(f"[{i}] assistant message with no content or tool calls")
            open_ids = [c["id"] for c in calls]
            if len(set(open_ids)) != len(open_ids):
                out.append(f"[{i}] repeated tool call ids {open_ids}")
    if open_ids:
        out.append(f"[end] calls {open_ids} never answered")
    return out


# -- Anthropic ------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _anthropic_message(i: int, m: dict[str, Any], out: list[str]) -> None:
    blocks = _blocks(m["content"])
    if not blocks:
        out.append(f"[{i}] {m['role']} message with empty content")
    for b in blocks:
        if b.get("type") == "text" and not str(b.get("text", "")).strip():
            out.append(f"[{i}] empty text block in a {m['role']} message")


def anthropic_violations(payload: Payload) -> list[str]:
    """Breaches of Anthropic's Messages API rules in one request body."""
    out: list[str] = []
    messages = payload["messages"]
    if messages and messages[0]["role"] != "user":
        out.append(f"first message is from the {messages[0]['role']}")
    uses: list[str] = []
    for i, m in enumerate(messages):
        _anthropic_message(i, m, out)
        if i and m["role"] == messages[i - 1]["role"]:
            out.append(f"[{i}] two {m['role']} messages in a row")
        blocks = _blocks(m["content"])
        kinds = [b.get("type") for b in blocks]
        results = [
            b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"
        ]
        if m["role"] == "user":
            if Counter(results) != Counter(uses):
                out.append(f"[{i}] tool_use {uses} answered by tool_result {results}")
            first_other = next(
                (k for k, kind in enumerate(kinds) if kind != "tool_result"), len(kinds)
            )
            if "tool_result" in kinds[first_other:]:
                out.append(f"[{i}] tool_result after other content")
            uses = []
        else:
            if uses:
                out.append(f"[{i}] tool_use {uses} not answered in the next message")
            if results:
                out.append(f"[{i}] tool_result in an assistant message")
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if uses:
        out.append(f"[end] tool_use {uses} never answered")
    return out


def cache_breakpoints(payload: Payload) -> list[tuple[str, int, str]]:
    """``(where, index, block type)`` of every ``cache_control`` in a body."""
    found: list[tuple[str, int, str]] = []
    system = payload.get("system")
    if isinstance(system, list):
        found += [
            ("system", k, b["type"])
            for k, b in enumerate(system)
            if "cache_control" in b
        ]
    for i, m in enumerate(payload["messages"]):
        for b in _blocks(m["content"]):
            if "cache_control" in b:
                found.append(("messages", i, b["type"]))
    return found


# -- Gemini ---------------------------------------------------------------------


def gemini_violations(payload: Payload) -> list[str]:
    """Breaches of Gemini's function-calling turn rules in one request."""
    out: list[str] = []
    contents = payload["contents"]
    calls = 0
    previous = "none"
    for i, c in enumerate(contents):
        parts = c.parts or []
        if not parts:
            out.append(f"[{i}] {c.role} turn with no parts")
        if c.role not in ("user", "model"):
            out.append(f"[{i}] role {c.role!r}")
        for p in parts:
            if p.text is not None and not p.text.strip() and not p.thought:
                out.append(f"[{i}] empty text part in a {c.role} turn")
        n_calls = sum(p.function_call is not None for p in parts)
        n_responses = sum(p.function_response is not None for p in parts)
        if n_responses != calls:
            out.append(f"[{i}] {calls} function calls answered by {n_responses}")
        if n_calls and previous not in ("user", "function_response"):
            out.append(f"[{i}] function call turn after a {previous} turn")
        calls = n_calls
        previous = "function_response" if n_responses else c.role
    if calls:
        out.append("[end] function calls never answered")
    return out


PROVIDERS: dict[str, tuple[Callable[..., Payload], Callable[[Payload], list[str]]]] = {
    "openai": (openai_payload, openai_violations),
    "anthropic": (anthropic_payload, anthropic_violations),
    "gemini": (gemini_payload, gemini_violations),
    "responses": (responses_payload, responses_violations),
}
"""Provider name: (request builder, checker)."""


def violations(messages: Sequence[BaseMessage]) -> dict[str, list[str]]:
    """Each provider's breaches for ``messages`` (providers with none left out)."""
    found = {}
    for name, (build, check) in PROVIDERS.items():
        errors = check(build(messages))
        if errors:
            found[name] = errors
    return found


# -- fuzzed histories -----------------------------------------------------------

THINKING = {"type": "thinking", "thinking": "weighing the options", "signature": "c2ln"}
TEXTS = st.sampled_from(["", " ", "look at src/app.py", "done", "x" * 300])


def _content(draw: Any, text: str) -> Any:
    shape = draw(st.sampled_from(["str", "blocks", "empty-block", "thinking"]))
    if shape == "str":
        return text
    if shape == "blocks":
        return [{"type": "text", "text": text}]
    if shape == "empty-block":
        return [{"type": "text", "text": ""}, {"type": "text", "text": text}]
    return [THINKING, {"type": "text", "text": text}]


def _ai_content(
    draw: Any, text: str, name: str, calls: list[dict[str, Any]]
) -> tuple[Any, dict[str, Any]]:
    """A reply's content and metadata as one of the providers' clients keeps it.

    Besides ``_content``'s shapes: an OpenAI Responses reply (a reasoning item,
    its message and its function calls, ids sharing the reply's name) and a
    Gemini reply (thought signatures per call id, the raw ``function_call``).
    """
    shape = draw(st.sampled_from(["plain", "plain", "responses", "gemini"]))
    if shape == "responses":
        blocks: list[Any] = [
            {"type": "reasoning", "id": f"rs_{name}", "summary": []},
            {"type": "text", "text": text, "id": f"msg_{name}"},
        ]
        blocks += [
            {
                "type": "function_call",
                "id": f"fc_{name}-{j}",
                "call_id": c["id"],
                "name": c["name"],
                "arguments": "{}",
            }
            for j, c in enumerate(calls)
        ]
        return blocks, {}
    if shape == "gemini" and calls:
        signatures = {c["id"]: "c2lnCg==" for c in calls}
        raw = {"name": calls[0]["name"], "arguments": "{}"}
        kwargs = {
            "__gemini_function_call_thought_signatures__": signatures,
            "function_call": raw,
        }
        return _content(draw, text), kwargs
    return _content(draw, text), {}


@st.composite
def histories(draw: Any, *, adjacent: bool = False) -> list[BaseMessage]:  # noqa: C901
    """Messy agent histories as real agents and checkpoints produce them.

    With ``adjacent=True`` assistant messages may stand next to each other (the
    guard joins them, ``test_fuzz_payloads.py``); with ``adjacent=False`` a user
    message always comes between.
    """
    out: list[BaseMessage] = []
    texts = TEXTS if adjacent else st.sampled_from(["look at src/app.py", "done"])
    if draw(st.booleans()):
        out.append(SystemMessage("You are a coding agent.", id="sys"))
    if draw(st.booleans()):  # else the history opens with an assistant message
        out.append(HumanMessage(_content(draw, "Fix the bug."), id="task"))
    for k in range(draw(st.integers(1, 8))):
        kind = draw(
            st.sampled_from(["call", "call", "call", "text", "human", "invalid"])
        )
        last_ai = bool(out) and isinstance(out[-1], AIMessage)
        if kind == "human" or (last_ai and not adjacent):
            out.append(HumanMessage(_content(draw, draw(texts)), id=f"h{k}"))
            if kind == "human":
                continue
        if kind == "text":
            out.append(AIMessage(_content(draw, draw(TEXTS)), id=f"a{k}"))
            continue
        ids = [f"c{k}_{j}" for j in range(draw(st.integers(1, 3)))]
        if draw(st.integers(0, 5)) == 0:
            ids.append(ids[0])  # a repeated call id
        calls = [{"name": "bash", "args": {"cmd": i}, "id": i} for i in ids]
        invalid = []
        if kind == "invalid":
            invalid = [
                {"name": "bash", "args": "{oops", "id": f"bad{k}", "error": "json"}
            ]
        content, kwargs = _ai_content(draw, draw(TEXTS), f"a{k}", calls)
        out.append(
            AIMessage(
                content,
                tool_calls=calls,
                invalid_tool_calls=invalid,
                additional_kwargs=kwargs,
                id=f"a{k}",
            )
        )
        for i in dict.fromkeys(ids):
            fate = draw(
                st.sampled_from(["ok", "ok", "ok", "empty", "missing", "twice"])
            )
            if fate == "missing":
                continue
            text = "" if fate == "empty" else draw(TEXTS)
            result = ToolMessage(text, tool_call_id=i, id=f"r{i}")
            out.append(result)
            if fate == "twice":
                out.append(result.model_copy(update={"id": f"d{i}"}))
        if invalid and draw(st.booleans()):
            out.append(ToolMessage("bad args", tool_call_id=f"bad{k}", id=f"rb{k}"))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(out)))
        if not adjacent and 0 < at < len(out) and isinstance(out[at - 1], AIMessage):
            at = len(out)
        out.insert(at, ToolMessage("stray", tool_call_id="nobody", id="orphan"))
    return out
