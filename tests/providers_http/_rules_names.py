"""Tool names, as each provider's request validation judges them.

Checked on the ``tools`` list and on the calls in the history; the texts are the
providers' own, as public error reports quote them:

- OpenAI (Chat Completions and Responses): ``^[a-zA-Z0-9_-]+$``, at most 64
  characters ("Invalid 'tools[0].function.name': string does not match pattern.
  Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'." and "string
  too long"). The same wording on a call in the history is [inferred].
- Anthropic: ``^[a-zA-Z0-9_-]{1,128}$`` on ``tools.N.custom.name``; on a
  ``tool_use`` in the history the reported path is
  ``messages.N.content.M.tool_use.name`` (its length bound here follows the tools
  rule [inferred]).
- Gemini: a letter or underscore first, then letters, digits, ``_ . : -``, at
  most 64 characters ("Invalid function name. Must start with a letter or an
  underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.),
  colons (:), or dashes (-), with a maximum length of 64."); the path of a call
  in the history is [inferred].
"""

from __future__ import annotations

import re

from ._rules import Body, Refusal, _anthropic_error, _blocks, _openai_error

OPENAI = re.compile(r"^[a-zA-Z0-9_-]+$")
ANTHROPIC = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
GEMINI = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")


def _openai(name: str, where: str) -> Refusal | None:
    if not OPENAI.match(name):
        return _openai_error(
            f"Invalid '{where}': string does not match pattern. Expected a string "
            "that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            where,
            "invalid_value",
        )
    if len(name) > 64:
        return _openai_error(
            f"Invalid '{where}': string too long. Expected a string with maximum "
            f"length 64, but got a string with length {len(name)} instead.",
            where,
            "string_above_max_length",
        )
    return None


def openai_violation(body: Body) -> Refusal | None:
    """A Chat Completions tool or call whose name OpenAI refuses."""
    for i, t in enumerate(body.get("tools") or []):
        found = _openai(str(t["function"]["name"]), f"tools[{i}].function.name")
        if found is not None:
            return found
    for i, m in enumerate(body.get("messages") or []):
        for j, call in enumerate(m.get("tool_calls") or []):
            where = f"messages[{i}].tool_calls[{j}].function.name"
            found = _openai(str(call["function"]["name"]), where)
            if found is not None:
                return found
    return None


def responses_violation(body: Body) -> Refusal | None:
    """A Responses tool or ``function_call`` item whose name OpenAI refuses."""
    for i, t in enumerate(body.get("tools") or []):
        if t.get("type") == "function":
            found = _openai(str(t["name"]), f"tools[{i}].name")
            if found is not None:
                return found
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if item.get("type") == "function_call":
            found = _openai(str(item["name"]), f"input[{i}].name")
            if found is not None:
                return found
    return None


def _anthropic(name: str, where: str) -> Refusal | None:
    if ANTHROPIC.match(name):
        return None
    return _anthropic_error(
        f"{where}: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
    )


def anthropic_violation(body: Body) -> Refusal | None:
    """A Messages tool or ``tool_use`` block whose name Anthropic refuses."""
    for i, t in enumerate(body.get("tools") or []):
        if t.get("type", "custom") == "custom":
            found = _anthropic(str(t["name"]), f"tools.{i}.custom.name")
            if found is not None:
                return found
    for i, m in enumerate(body.get("messages") or []):
        for j, b in enumerate(_blocks(m)):
            if b.get("type") == "tool_use":
                where = f"messages.{i}.content.{j}.tool_use.name"
                found = _anthropic(str(b.get("name")), where)
                if found is not None:
                    return found
    return None


GEMINI_NAME_RULE = (
    "Invalid function name. Must start with a letter or an underscore. Must be "
    "alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes "
    "(-), with a maximum length of 64."
)


def gemini_violation(body: Body) -> str | None:
    """The message for a Gemini declaration or call whose name Gemini refuses."""
    for i, tool in enumerate(body.get("tools") or []):
        for j, d in enumerate(tool.get("functionDeclarations") or []):
            if not GEMINI.match(str(d.get("name"))):
                return (
                    f"* GenerateContentRequest.tools[{i}].function_declarations[{j}]"
                    f".name: {GEMINI_NAME_RULE}\n"
                )
    for i, content in enumerate(body.get("contents") or []):
        for j, part in enumerate(content.get("parts") or []):
            call = part.get("functionCall")
            if call is not None and not GEMINI.match(str(call.get("name"))):
                return (
                    f"* GenerateContentRequest.contents[{i}].parts[{j}].function_call"
                    f".name: {GEMINI_NAME_RULE}\n"
                )
    return None
