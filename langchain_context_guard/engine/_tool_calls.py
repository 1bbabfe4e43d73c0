"""Tool calls taken out of an assistant message, in every form providers keep them.

LangChain's ``tool_calls`` is one form; integrations also keep raw calls
(``additional_kwargs["tool_calls"]``, Gemini's ``function_call``), content blocks
(Anthropic ``tool_use``, OpenAI Responses ``function_call``) and per-call
metadata (Gemini's thought signatures). A call removed from one form and left in
another reaches the provider unanswered, so the passes remove calls only here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

GEMINI_SIGNATURES = "__gemini_function_call_thought_signatures__"
"""langchain-google-genai's ``additional_kwargs`` map of call id to signature."""


def without_tool_calls(message: AIMessage, drop_ids: Collection[str]) -> AIMessage:
    """A copy of an AIMessage without the named tool calls, everywhere they appear.

    Removes them from ``tool_calls``, ``invalid_tool_calls``, Anthropic
    ``tool_use`` and OpenAI Responses ``function_call`` content blocks, the raw
    ``additional_kwargs["tool_calls"]`` that some integrations send when
    ``tool_calls`` is empty, Gemini's thought signatures of those calls, and
    ``additional_kwargs["function_call"]`` once no call it could stand for is
    left: langchain-google-genai turns that key back into a call.
    """
    drop = set(drop_ids)
    kwargs = dict(message.additional_kwargs)
    raw = kwargs.get("tool_calls")
    if isinstance(raw, list):
        kept_raw = [
            c for c in raw if not (isinstance(c, dict) and (c.get("id") or "") in drop)
        ]
        if kept_raw:
            kwargs["tool_calls"] = kept_raw
        else:
            kwargs.pop("tool_calls")
    calls = [c for c in message.tool_calls if (c.get("id") or "") not in drop]
    _drop_raw_call(kwargs, calls, drop)
    content: Any = message.content
    if isinstance(content, list):
        content = _without_call_blocks(content, message.tool_calls, drop)
    return message.model_copy(
        update={
            "tool_calls": calls,
            "invalid_tool_calls": [
                c for c in message.invalid_tool_calls if (c.get("id") or "") not in drop
            ],
            "additional_kwargs": kwargs,
            "content": content,
        }
    )


def _drop_raw_call(
    kwargs: dict[str, Any], calls: list[Any], drop: Collection[str]
) -> None:
    """Gemini's traces of dropped calls: their signatures, a lone raw call."""
    signatures = kwargs.get(GEMINI_SIGNATURES)
    if isinstance(signatures, dict) and any(k in drop for k in signatures):
        kwargs[GEMINI_SIGNATURES] = {
            k: v for k, v in signatures.items() if k not in drop
        }
    function_call = kwargs.get("function_call")
    if isinstance(function_call, dict):
        names = {c.get("name") for c in calls}
        if function_call.get("name") not in names:
            kwargs.pop("function_call")


def _without_call_blocks(
    content: list[Any], calls: Sequence[Any], drop: Collection[str]
) -> list[Any]:
    """``content`` less the blocks of dropped calls, signature sidecars renumbered.

    A ``function_call_signature`` sidecar names its call by its index in
    ``tool_calls`` (langchain-google-genai), so a sidecar of a dropped call
    goes and the later ones move down with their calls.
    """
    index = {i: i for i in range(len(calls))}
    shift = 0
    for i, call in enumerate(calls):
        if (call.get("id") or "") in drop:
            index.pop(i)
            shift += 1
        else:
            index[i] = i - shift
    out = []
    for block in content:
        if not isinstance(block, dict):
            out.append(block)
            continue
        kind = block.get("type")
        if kind in {"tool_use", "tool_call"} and (block.get("id") or "") in drop:
            continue
        if kind == "function_call" and (block.get("call_id") or "") in drop:
            continue
        at = block.get("index")
        if kind == "function_call_signature" and isinstance(at, int) and shift:
            if at not in index:
                continue
            block = {**block, "index": index[at]}
        out.append(block)
    return out


def _first_per_id(items: list[Any], key_of: Callable[[Any], object]) -> list[Any]:
    """``items`` without a call whose id an earlier call in it has."""
    seen: set[str] = set()
    out: list[Any] = []
    for item in items:
        key = key_of(item)
        if isinstance(key, str) and key:
            if key in seen:
                continue
            seen.add(key)
        out.append(item)
    return out


def _block_call_id(block: Any) -> object:
    """The call id of a content block that is a call (None for other blocks)."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind in {"tool_use", "tool_call"}:
        return block.get("id")
    return block.get("call_id") if kind == "function_call" else None


def _raw_call_id(call: Any) -> object:
    return call.get("id") if isinstance(call, dict) else None


def first_calls(message: AIMessage) -> AIMessage:
    """``message`` with each repeated tool-call id kept once (the first).

    In ``tool_calls``, Anthropic ``tool_use`` and Responses ``function_call``
    content blocks and the raw ``additional_kwargs["tool_calls"]``: providers
    reject a request that repeats a call id. ``message`` itself when no id
    repeats.
    """
    content: Any = message.content
    blocks = _first_per_id(content, _block_call_id) if isinstance(content, list) else []
    raw = message.additional_kwargs.get("tool_calls")
    raw_kept = _first_per_id(raw, _raw_call_id) if isinstance(raw, list) else []
    calls = _first_per_id(message.tool_calls, _raw_call_id)
    if (
        len(calls) == len(message.tool_calls)
        and (not isinstance(content, list) or len(blocks) == len(content))
        and (not isinstance(raw, list) or len(raw_kept) == len(raw))
    ):
        return message
    update: dict[str, Any] = {"tool_calls": calls}
    if isinstance(content, list):
        update["content"] = blocks
    if isinstance(raw, list):
        update["additional_kwargs"] = {
            **message.additional_kwargs,
            "tool_calls": raw_kept,
        }
    return message.model_copy(update=update)


def with_call_ids(message: AIMessage, renamed: Mapping[str, str]) -> AIMessage:
    """A copy of an AIMessage whose calls ``renamed`` names carry the new ids.

    In every form the call is kept: ``tool_calls``, Anthropic ``tool_use`` and
    Responses ``function_call`` blocks (``call_id``), the raw
    ``additional_kwargs["tool_calls"]``, and Gemini's signatures by call id.
    """

    def new(call_id: object) -> object:
        return renamed.get(call_id, call_id) if isinstance(call_id, str) else call_id

    kwargs = dict(message.additional_kwargs)
    raw = kwargs.get("tool_calls")
    if isinstance(raw, list):
        kwargs["tool_calls"] = [
            {**c, "id": new(c.get("id"))} if isinstance(c, dict) else c for c in raw
        ]
    signatures = kwargs.get(GEMINI_SIGNATURES)
    if isinstance(signatures, dict):
        kwargs[GEMINI_SIGNATURES] = {new(k): v for k, v in signatures.items()}
    content: Any = message.content
    if isinstance(content, list):
        content = [_renamed_block(b, new) for b in content]
    calls = [{**c, "id": new(c.get("id"))} for c in message.tool_calls]
    return message.model_copy(
        update={"tool_calls": calls, "additional_kwargs": kwargs, "content": content}
    )


def _renamed_block(block: Any, new: Callable[[object], object]) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind in {"tool_use", "tool_call"} and "id" in block:
        return {**block, "id": new(block["id"])}
    if kind == "function_call" and "call_id" in block:
        return {**block, "call_id": new(block["call_id"])}
    return block


def with_call_args(message: AIMessage, args: Mapping[str, dict[str, Any]]) -> AIMessage:
    """A copy of an AIMessage whose calls with an id in ``args`` carry those args.

    In every form the call is kept: ``tool_calls``, Anthropic ``tool_use`` blocks
    (``input``), Responses ``function_call`` blocks and the raw
    ``additional_kwargs["tool_calls"]`` (``arguments``, JSON text).
    """

    def given(call_id: object) -> dict[str, Any] | None:
        return args.get(call_id) if isinstance(call_id, str) else None

    kwargs = dict(message.additional_kwargs)
    raw = kwargs.get("tool_calls")
    if isinstance(raw, list):
        kwargs["tool_calls"] = [_raw_with_args(c, given(_raw_call_id(c))) for c in raw]
    content: Any = message.content
    if isinstance(content, list):
        content = [_block_with_args(b, given(_block_call_id(b))) for b in content]
    calls = [
        {**c, "args": new} if (new := given(c.get("id"))) is not None else c
        for c in message.tool_calls
    ]
    return message.model_copy(
        update={"tool_calls": calls, "additional_kwargs": kwargs, "content": content}
    )


def _raw_with_args(call: Any, args: dict[str, Any] | None) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if args is None or not isinstance(function, dict):
        return call
    return {**call, "function": {**function, "arguments": json.dumps(args)}}


def _block_with_args(block: Any, args: dict[str, Any] | None) -> Any:
    if args is None:
        return block
    kind = block.get("type")
    if kind == "tool_use":
        return {**block, "input": args}
    if kind == "tool_call":
        return {**block, "args": args}
    return {**block, "arguments": json.dumps(args)}  # a function_call block
