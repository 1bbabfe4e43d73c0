"""Pass 3: compress old tool results in batches, keeping the newest whole.

With ``assistant``, the assistant message that made a compressed result's call
is compressed with it: its text (the reasoning written around the call) shrinks
to a few lines, while its tool calls, the commands it ran, stay whole. Those hold
most of the names an agent uses again, for a fraction of the tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._messages import marker, memo_rewrite, original_size, text_of, with_marker
from .._policy import GuardPolicy
from .._result_keys import Naming, naming, pointer
from .._tool_calls import GEMINI_SIGNATURES, with_call_args
from .._tool_policy import Written, supersede_keys, tool_keeps, tool_name, whole_tools
from ._supersede import SUPERSEDED, supersede_message, superseded_reads
from ._text import compress_lines
from ._thinking import has_reasoning


def compress_old_tool_results(
    messages: Sequence[BaseMessage],
    *,
    keep_recent: int = 6,
    min_chars: int = 500,
    head_lines: int = 3,
    tail_lines: int = 2,
    batch: int = 8,
    name_source: Naming = False,
    assistant: bool = False,
    keep_whole: Collection[str] = frozenset(),
    tool_keep: Mapping[str, int] | None = None,
    supersede: Mapping[str, str | tuple[str, ...] | Written] | None = None,
    call_args: bool = False,
) -> list[BaseMessage]:
    """Shrink tool results older than the newest ``keep_recent`` to a few lines.

    Results over ``min_chars`` characters become their first ``head_lines`` and last
    ``tail_lines`` lines plus a marker with the omitted lines and original size;
    their tool calls stay as they are (with ``assistant``, the text of the
    assistant message making the call is shrunk the same way, its calls kept).
    The boundary advances only in steps of ``batch`` results, so an old message
    is rewritten once per ``batch`` new results rather than on every call: each
    rewrite invalidates the provider's prompt cache from that message on.
    ``name_source``: the marker names the result's tool call id, or its key
    (``_result_keys.Naming``), to read the full text back (it is archived).
    ``keep_whole``: tool names whose results are never compressed
    (``_tool_policy.whole_tools``); they still count in the batches.
    ``tool_keep``: per tool name, its own count of newest results kept whole
    (``_tool_policy.tool_keeps``). ``supersede``: per tool name, the argument
    whose repeat supersedes an older result (``_supersede``); a superseded
    result becomes a pointer and counts in no batch (the assistant message that
    made its call is left as the batches leave it; with ``name_source`` its
    pointer names its own key or call id too).
    """
    results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
    newer = superseded_reads(messages, supersede or {}, keep_whole)
    old = due_results(messages, results, keep_recent, batch, tool_keep, newer)
    if assistant:
        old = with_callers(messages, old)
    if newer:
        old = sorted({*old, *newer})
    out = list(messages)
    changed = False
    for i in old:
        if i in newer:
            new = supersede_message(out[i], newer[i], name_source=name_source)
        else:
            new = compress_message(
                out[i],
                min_chars,
                head_lines,
                tail_lines,
                name_source,
                keep_whole,
                call_args,
            )
        if new is not out[i]:
            out[i] = new
            changed = True
    if changed:
        return out
    return messages if isinstance(messages, list) else out


def due_results(
    messages: Sequence[BaseMessage],
    results: Sequence[int],
    keep: int,
    batch: int,
    tool_keep: Mapping[str, int] | None = None,
    newer: Collection[int] = (),
) -> list[int]:
    """The results (indices, in order) due for compression.

    The oldest of ``results`` past the newest ``keep``, in batches of ``batch``;
    a result of a tool in ``tool_keep`` is counted among its tool's results
    instead, against that tool's own number. Superseded results (``newer``)
    count in neither: they are pointers already.
    """
    counted = [i for i in results if i not in newer] if newer else results
    if not tool_keep:
        return list(counted[: compress_boundary(len(counted), keep, batch)])
    general = set(counted[: compress_boundary(len(counted), keep, batch)])
    own: dict[str, list[int]] = {}
    for i in counted:
        name = tool_name(messages[i])
        if name is not None and name in tool_keep:
            general.discard(i)
            own.setdefault(name, []).append(i)
    for name, found in own.items():
        general.update(found[: compress_boundary(len(found), tool_keep[name], batch)])
    return sorted(general)


def compress_floor(policy: GuardPolicy, window: int) -> int:
    """Characters at or below which an old message stays whole, for a window."""
    share = policy.compress_min_share * policy.budget(window)
    return max(policy.compress_min_chars, round(share * policy.chars_per_token))


def compressor(
    policy: GuardPolicy, window: int, ordinals: Mapping[str, int] | None = None
) -> Callable[[BaseMessage], BaseMessage]:
    """``compress_message`` with a policy's settings for a window.

    ``ordinals``: each result's place in the history (``result_ordinals``),
    which archived results' markers name them by.
    """
    return partial(
        compress_message,
        min_chars=compress_floor(policy, window),
        head_lines=policy.compress_head_lines,
        tail_lines=policy.compress_tail_lines,
        name_source=naming(policy.archived_results, ordinals),
        keep_whole=whole_tools(policy),
        call_args=policy.compress_call_args,
    )


def rules(policy: GuardPolicy) -> dict[str, Any]:
    """A policy's per-tool compression rules, as ``compress_old_tool_results`` takes."""
    return {
        "keep_whole": whole_tools(policy),
        "tool_keep": tool_keeps(policy),
        "supersede": supersede_keys(policy),
        "call_args": policy.compress_call_args,
    }


def squeezer(
    policy: GuardPolicy, window: int, ordinals: Mapping[str, int] | None = None
) -> Callable[[list[BaseMessage]], list[BaseMessage]]:
    """What a cut squeezes its kept messages with: every old result compressed.

    ``compress_old_tool_results`` with a policy's settings and batches of one,
    so the newest ``keep_recent_tool_results`` stay whole and nothing else does.
    """
    return partial(
        compress_old_tool_results,
        keep_recent=policy.keep_recent_tool_results,
        min_chars=compress_floor(policy, window),
        head_lines=policy.compress_head_lines,
        tail_lines=policy.compress_tail_lines,
        batch=1,
        name_source=naming(policy.archived_results, ordinals),
        assistant=policy.compress_assistant_text,
        **rules(policy),
    )


def compress_boundary(results: int, keep_recent: int, batch: int) -> int:
    """How many of the oldest ``results`` tool results are due for compression."""
    old = results - keep_recent
    return (old // batch) * batch if old > 0 else 0


def callers(messages: Sequence[BaseMessage], i: int) -> list[int]:
    """Assistant messages compressed with the result at ``i``, oldest first.

    Those since the previous tool result: the one making the call, and any
    before it that made none (a later result of the same call has none).
    """
    out: list[int] = []
    j = i - 1
    while j >= 0 and not isinstance(messages[j], ToolMessage):
        if isinstance(messages[j], AIMessage):
            out.append(j)
        j -= 1
    return out[::-1]


def with_callers(messages: Sequence[BaseMessage], results: Sequence[int]) -> list[int]:
    """``results`` with each one's ``callers`` before it, in order."""
    out: list[int] = []
    for i in results:
        out += callers(messages, i)
        out.append(i)
    return out


def too_short(message: BaseMessage, min_chars: int) -> bool:
    """Plain text at or below ``min_chars``: compression leaves it whole."""
    content = message.content
    return isinstance(content, str) and len(content) <= min_chars


def compress_message(
    message: BaseMessage,
    min_chars: int,
    head_lines: int,
    tail_lines: int,
    name_source: Naming = False,
    keep_whole: Collection[str] = frozenset(),
    call_args: bool = False,
) -> BaseMessage:
    """A tool result or assistant message as compression leaves it (memoised).

    An assistant message keeps its tool calls (with ``call_args``, their long
    text arguments shrunk: ``_short_args``); marked messages (``kept_whole``
    too) stay as they are,
    the guard's joined assistant turns too (``merged``): each part was weighed
    alone in the call that joined them, so a prompt prepared again stays as it is.
    """
    calls = call_args and isinstance(message, AIMessage) and bool(message.tool_calls)
    if too_short(message, min_chars) and not calls:
        return message  # too short to compress: not kept in the memo
    if keep_whole and tool_name(message) in keep_whole:
        return message
    mark = marker(message)
    if mark is not None and mark.get("kind") in {
        "compressed",
        SUPERSEDED,
        "synthetic_result",
        "merged",
        "kept_whole",
    }:
        return message
    source = pointer(message, name_source)  # a key is a place in one history
    archived = calls and name_source is not False  # cut arguments name their keys
    return memo_rewrite(
        message,
        ("compress", min_chars, head_lines, tail_lines, source, calls, archived),
        lambda m: _compress(
            m, min_chars, head_lines, tail_lines, source, calls, archived
        ),
    )


def _compress(
    message: BaseMessage,
    min_chars: int,
    head_lines: int,
    tail_lines: int,
    source: str | None = None,
    call_args: bool = False,
    archived: bool = False,
) -> BaseMessage:
    if isinstance(message, AIMessage):
        call_lines = (head_lines, tail_lines) if call_args else None
        return _compress_assistant(message, min_chars, call_lines, archived, source)
    text = text_of(message.content)
    if len(text) <= min_chars or (not isinstance(message.content, str) and not text):
        return message
    chars, lines = original_size(message, text)
    short = compress_lines(
        text, head_lines, tail_lines, source=source, original=(chars, lines)
    )
    if len(short) >= len(text):
        return message
    return with_marker(message, "compressed", content=short, original_chars=chars)


def _compress_assistant(
    message: AIMessage,
    min_chars: int,
    call_lines: tuple[int, int] | None = None,
    archived: bool = False,
    source: str | None = None,
) -> BaseMessage:
    """Its text to its first line and a marker; tool calls and other blocks stay.

    Content blocks other than text (tool use, images) keep their place; one
    holding reasoning leaves the message as the provider sent it (signatures).
    ``call_lines``: its calls' long text arguments are cut to these head and
    tail lines too (``_short_args``; ``archived``: each names its key).
    ``source``: the marker of its cut text names this key (``turn_key``).
    """
    content = message.content
    texts: list[str | None] = [content] if isinstance(content, str) else []
    if not isinstance(content, str):
        kinds = {b.get("type") for b in content if isinstance(b, dict)}
        if kinds & {"thinking", "redacted_thinking", "reasoning"}:
            return message
        texts = [_block_text(b) for b in content]
    args = _short_args(message, min_chars, call_lines, archived) if call_lines else {}
    if args:
        message = with_call_args(message, args)
        content = message.content
    text = "\n".join(t for t in texts if t is not None)
    if len(text) <= min_chars and not args:
        return message
    chars, lines = original_size(message, text)
    short = text
    if len(text) > min_chars:
        short = compress_lines(
            text,
            1,
            0,
            source=source,
            what="assistant message",
            original=(chars, lines),
        )
    if len(short) >= len(text):  # the text stays; cut calls alone get the marker
        if not args:
            return message
        return with_marker(message, "compressed", original_chars=chars)
    if isinstance(content, str):
        new: Any = short
    else:
        new, placed = [], False
        for block in content:
            if _block_text(block) is None:
                new.append(block)
            elif not placed:
                new.append({"type": "text", "text": short})
                placed = True
    return with_marker(message, "compressed", content=new, original_chars=chars)


def args_key(call_id: str, name: str) -> str:
    """The archive key of one argument of a call: ``<call id>:<name>``."""
    return f"{call_id}:{name}"


_SIGNED_KWARGS = frozenset({GEMINI_SIGNATURES, "function_call"})
"""``additional_kwargs`` whose calls are left whole: Gemini's signatures by call
id, and a legacy ``function_call`` (one call, kept beside ``tool_calls``)."""


def is_signed_turn(message: AIMessage) -> bool:
    """Whether a provider checks ``message``'s calls: reasoning or signatures."""
    return has_reasoning(message) or not _SIGNED_KWARGS.isdisjoint(
        message.additional_kwargs
    )


def cut_call_args(
    message: BaseMessage, min_chars: int, lines: tuple[int, int], archived: bool
) -> BaseMessage:
    """``message`` with its calls' long text arguments cut (``_short_args``).

    Also when its text was compressed before without them; the marker is the
    compression's (kept, or added for the calls alone).
    """
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return message
    args = _short_args(message, min_chars, lines, archived)
    if not args:
        return message
    cut = with_call_args(message, args)
    if marker(cut) is not None:
        return cut
    chars, _ = original_size(message, text_of(message.content))
    return with_marker(cut, "compressed", original_chars=chars)


def _short_args(
    message: AIMessage, min_chars: int, lines: tuple[int, int], archived: bool = False
) -> dict[str, dict[str, Any]]:
    """Per call id, the call's arguments with each long text one shrunk.

    A text over ``min_chars`` keeps its first and last ``lines`` around a
    marker, as a result does; ``archived``: the marker names the key its full
    text is archived under (``args_key``). A call's only argument (a shell
    command, a query) is the call itself and stays; so does every call of a
    message that carries reasoning or signatures (the provider checks them) or a
    legacy ``function_call``. Calls left as they are are not in the map.
    """
    if is_signed_turn(message):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for call in message.tool_calls:
        given, call_id = call["args"], call.get("id")
        if not call_id or len(given) < 2:
            continue
        args = dict(given)
        for name, value in given.items():
            if isinstance(value, str) and len(value) > min_chars:
                short = compress_lines(
                    value,
                    *lines,
                    source=args_key(call_id, name) if archived else None,
                    what=f"tool call argument {name}",
                )
                if len(short) < len(value):
                    args[name] = short
        if args != given:
            out[call_id] = args
    return out


def _block_text(block: Any) -> str | None:
    """The text of a content block that is text, else None."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text":
        return str(block.get("text", ""))
    return None
