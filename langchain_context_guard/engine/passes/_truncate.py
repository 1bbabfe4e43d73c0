"""Pass 2: cut oversized tool results (and, optionally, any message) to head + tail."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from .._messages import (
    kept_whole,
    map_messages,
    memo_rewrite,
    original_size,
    text_of,
    with_marker,
)
from .._policy import GuardPolicy
from .._result_keys import Naming, naming, pointer
from .._tool_policy import result_caps, tool_name
from ._paged_reads import paged_read
from ._text import repointed, truncate_text


def _cut_content(
    message: BaseMessage, max_chars: int, head: int, tail: int, source: str | None
) -> BaseMessage:
    content = message.content
    if isinstance(content, str):
        if len(content) <= max_chars:
            return message
        chars, lines = original_size(message, content)
        paged = paged_read(tool_name(message), content)
        new = truncate_text(
            content, max_chars, head, tail, source, original=chars, paged=paged
        )
        return with_marker(
            message,
            "truncated",
            content=new,
            original_chars=chars,
            original_lines=lines,
        )
    blocks = list(content)
    total = lines = 0
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text":
            text = str(block.get("text", ""))
            if len(text) > max_chars:
                total += len(text)
                lines += text.count("\n") + 1
                blocks[i] = {
                    **block,
                    "text": truncate_text(text, max_chars, head, tail, source),
                }
        elif isinstance(block, str) and len(block) > max_chars:
            total += len(block)
            lines += block.count("\n") + 1
            blocks[i] = truncate_text(block, max_chars, head, tail, source)
    if not total:
        return message
    return with_marker(
        message,
        "truncated",
        content=blocks,
        original_chars=total,
        original_lines=lines,
    )


def _cut(
    message: BaseMessage, max_chars: int, head: int, tail: int, name: Naming = False
) -> BaseMessage:
    content = message.content
    if isinstance(content, str) and len(content) <= max_chars:
        return message  # nothing to cut: not kept in the memo
    # The memo is keyed by what the marker names: a key is a place in one history.
    source = pointer(message, name)
    return memo_rewrite(
        message,
        ("truncate", max_chars, head, tail, source),
        lambda m: _cut_content(m, max_chars, head, tail, source),
    )


_FENCE = re.compile(r"\n*```[\w+-]*\n(.*?)\n?```[ \t]*", re.DOTALL)
"""A fenced block with the newlines before it and the blanks after it: what
``without_fences`` finds, as this pattern would (the tests compare them)."""


def _fenced(message: AIMessage) -> bool:
    """Whether ``message`` may repeat a tool call in a fenced block.

    If not, dedupe leaves it as it is, with no memo entry.
    """
    content = message.content
    return isinstance(content, str) and "```" in content and bool(message.tool_calls)


def _drop_repeated_calls(message: AIMessage) -> BaseMessage:
    """``message`` without fenced code blocks that repeat a tool call's argument.

    Agents that write their action as text (ReAct, mini-swe-agent) and have it
    parsed into a tool call send each command twice; the call carries it, so the
    copy in the text is dropped (nothing the model wrote is lost). Called on a
    message ``_fenced`` accepted.
    """
    content = message.content
    if not isinstance(content, str):  # ``_fenced`` said it is (for the type checker)
        return message
    args = {
        v.strip()
        for call in message.tool_calls
        for v in call["args"].values()
        if isinstance(v, str) and v.strip()
    }
    new = without_fences(content, args).rstrip()
    if new == content.rstrip() or not new:
        return message
    return with_marker(
        message, "deduplicated", content=new, original_chars=len(content)
    )


def without_fences(content: str, args: set[str]) -> str:
    """``_FENCE.sub`` dropping the blocks whose stripped body is in ``args``.

    The same matches as the pattern, found from each fence with ``str.find``
    rather than by trying the pattern at every character (the pattern's
    leading newlines start it anywhere): a cold history goes through every
    assistant message once.
    """
    out: list[str] = []
    done = pos = at = 0  # copied up to ``done``; matches start at ``pos`` or later
    n = len(content)
    while (i := content.find("```", at)) >= 0:
        start = i
        while start > pos and content[start - 1] == "\n":
            start -= 1
        p = i + 3
        while p < n and (content[p].isalnum() or content[p] in "_+-"):
            p += 1
        q = content.find("```", p + 1) if p < n and content[p] == "\n" else -1
        if q < 0:
            at = i + 1
            continue
        body = content[p + 1 : q - 1 if q - 1 > p and content[q - 1] == "\n" else q]
        end = q + 3
        while end < n and content[end] in " \t":
            end += 1
        if body.strip() in args:
            out.append(content[done:start])
            done = end
        pos = at = end
    if not out:
        return content
    out.append(content[done:])
    return "".join(out)


MIN_CUT_CHARS = 400
"""The smallest cap a token limit sets on a result's text: room for the marker
and a real head and tail (about 100 characters each), and above any cut's own
length, so a cut output is not cut again (``prepare`` stays idempotent)."""


def _chars_within(
    message: BaseMessage, max_tokens: int, count: Callable[[BaseMessage], int]
) -> int | None:
    """Largest character cap that brings ``message`` under ``max_tokens``, if needed.

    Only its text can shrink: what the other blocks (images, files) cost is
    taken off the limit first, and when they alone are over it, the text keeps
    ``MIN_CUT_CHARS``.
    """
    tokens = count(message)
    if tokens <= max_tokens:
        return None
    rest = count(message.model_copy(update={"content": _no_text(message.content)}))
    text_tokens = tokens - rest
    if text_tokens <= 0:
        return None  # no text: nothing a cut can take off
    chars = len(text_of(message.content))
    cap = int(chars * (max_tokens - rest) / text_tokens * 0.9)
    return max(cap, MIN_CUT_CHARS)


def _no_text(content: str | list[Any]) -> str | list[Any]:
    """``content`` with its text emptied (what its other blocks cost)."""
    if isinstance(content, str):
        return ""
    return [
        ""
        if isinstance(b, str)
        else {**b, "text": ""}
        if isinstance(b, dict) and b.get("type") == "text"
        else b
        for b in content
    ]


def truncate_tool_results(
    messages: Sequence[BaseMessage],
    *,
    max_chars: int = 50_000,
    head_chars: int = 2_000,
    tail_chars: int = 2_000,
    max_tokens: int | None = None,
    token_counter: Callable[[BaseMessage], int] | None = None,
    max_message_chars: int | None = None,
    dedupe_calls: bool = False,
    name_source: Naming = False,
    tool_caps: Mapping[str, int | None] | None = None,
) -> list[BaseMessage]:
    """Cut tool results over ``max_chars`` characters to head + marker + tail.

    With ``max_tokens`` and ``token_counter``, a result still above ``max_tokens``
    tokens (its share of the window) is cut further, keeping the same head/tail
    proportions. ``max_message_chars`` applies the cut to every non-system
    message. ``dedupe_calls`` drops, from assistant messages, fenced code blocks
    that repeat one of their tool calls' arguments verbatim. ``name_source``:
    the marker of a cut tool result names its tool call id, or its key where a
    mapping of places is given (``_result_keys.Naming``), to read the full text
    back (an adapter archives it; ``GuardPolicy.archived_results``).
    ``tool_caps``: per tool name, its results' cap instead of ``max_chars``;
    None: never cut (``_tool_policy.result_caps``).
    """
    return map_messages(
        messages,
        partial(
            truncate_message,
            max_chars=max_chars,
            head_chars=head_chars,
            tail_chars=tail_chars,
            max_tokens=max_tokens,
            token_counter=token_counter,
            max_message_chars=max_message_chars,
            dedupe_calls=dedupe_calls,
            name_source=name_source,
            tool_caps=tool_caps,
        ),
    )


def truncate_message(
    message: BaseMessage,
    *,
    max_chars: int,
    head_chars: int,
    tail_chars: int,
    max_tokens: int | None,
    token_counter: Callable[[BaseMessage], int] | None,
    max_message_chars: int | None,
    dedupe_calls: bool = False,
    name_source: Naming = False,
    tool_caps: Mapping[str, int | None] | None = None,
) -> BaseMessage:
    """One message as ``truncate_tool_results`` leaves it."""
    if dedupe_calls and isinstance(message, AIMessage) and _fenced(message):
        message = memo_rewrite(message, ("dedupe",), _drop_repeated_calls)
    is_tool = isinstance(message, ToolMessage)
    message = repointed(message, name_source)
    if kept_whole(message):
        return message
    if not is_tool and (
        max_message_chars is None or isinstance(message, SystemMessage)
    ):
        return message
    limit = max_chars if is_tool else max_message_chars or max_chars
    name = tool_name(message)
    if tool_caps and name is not None and name in tool_caps:
        cap = tool_caps[name]
        if cap is None:
            return message  # an excluded tool's result: never cut
        limit = cap
    if max_message_chars is not None:
        limit = min(limit, max_message_chars)
    head, tail = _scaled(limit, max_chars, head_chars, tail_chars)
    new = _cut(message, limit, head, tail, name_source)
    if is_tool and max_tokens is not None and token_counter is not None:
        # Cut the original again with a smaller cap (never a cut of a cut),
        # until it fits or text is no longer what is over.
        for _ in range(6):
            cap = _chars_within(new, max_tokens, token_counter)
            if cap is None:
                break
            h, t = _scaled(cap, max_chars, head_chars, tail_chars)
            smaller = _cut(message, cap, h, t, name_source)
            if smaller is new or len(text_of(smaller.content)) >= len(
                text_of(new.content)
            ):
                break
            new = smaller
    return new


def _scaled(limit: int, max_chars: int, head: int, tail: int) -> tuple[int, int]:
    """Head/tail sizes for a cap of ``limit`` chars, in the configured proportions."""
    if limit >= max_chars:
        return head, tail
    room = max(limit - 200, 2)
    share = head / (head + tail) if head + tail else 0.5
    h = int(room * share)
    return h, max(room - h, 0)


def truncator(
    policy: GuardPolicy,
    budget: int,
    count: Callable[[BaseMessage], int],
    ordinals: Mapping[str, int] | None = None,
) -> Callable[[BaseMessage], BaseMessage | None]:
    """``truncate_message`` with a policy's settings for a budget.

    ``ordinals``: each result's place in the history (``result_ordinals``),
    which archived results' markers name them by.
    """
    return partial(
        truncate_message,
        max_chars=policy.max_tool_result_chars,
        head_chars=policy.truncate_head_chars,
        tail_chars=policy.truncate_tail_chars,
        max_tokens=int(policy.max_tool_result_share * budget),
        token_counter=count,
        max_message_chars=policy.max_chars_per_message,
        dedupe_calls=policy.dedupe_call_text,
        name_source=naming(policy.archived_results, ordinals),
        tool_caps=result_caps(policy),
    )
