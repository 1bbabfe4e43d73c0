"""Pass 5: strip reasoning from older assistant messages.

With ``keep_signed`` (``signed_stays``) signed reasoning is left where it is: a
model that binds each signed block to the conversation before it would find
every newer block stale once an older one went. Pruning afresh on every call,
the strip would take the reasoning the last prompt sent off its newest reply, so
the block behind it, the newest, would be stale on every call; there signed
reasoning goes only with an edit before it that cannot be avoided
(``_bound_thinking``), or when the trim needs its room (``fit_answers``). With
``stable_prefix`` the strip runs only when a prompt is pruned afresh, whose cut
makes the blocks after it stale anyway: there it frees their room, as before
(keeping them billed 2% more input at 16k and 5% at 32k on the replay).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from .._messages import is_reasoning_item, memo_rewrite, running_turn_start
from .._policy import GuardPolicy
from ._bound_thinking import is_signed

REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
REASONING_KWARGS = ("reasoning_content", "reasoning")


def signed_stays(policy: GuardPolicy) -> bool:
    """Whether ``strip_old_thinking`` leaves signed reasoning (module docstring)."""
    return policy.bound_thinking is True and not policy.stable_prefix


def has_reasoning(message: BaseMessage) -> bool:
    """Whether an assistant message carries reasoning in any known form."""
    if not isinstance(message, AIMessage):
        return False
    if any(k in message.additional_kwargs for k in REASONING_KWARGS):
        return True
    content = message.content
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in REASONING_BLOCKS for b in content
    )


def _strip(message: BaseMessage, keep_signed: bool = False) -> BaseMessage:
    kwargs = {
        k: v for k, v in message.additional_kwargs.items() if k not in REASONING_KWARGS
    }
    content: Any = message.content
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") in REASONING_BLOCKS)
            or (keep_signed and is_signed(b))
        ]
        if (
            keep_signed
            and len(content) == len(message.content)
            and kwargs == (message.additional_kwargs)
        ):
            return message  # only signed reasoning: nothing to strip
        if any(map(is_reasoning_item, message.content)):
            content = [_unlinked(b) for b in content]
        if not content:
            content = ""
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})


_LINKED = frozenset({"text", "output_text", "refusal", "function_call"})
"""Responses items that carry the id tying them to the reasoning item before them."""


def _unlinked(block: Any) -> Any:
    """``block`` without the item id that requires its reasoning item.

    The Responses API rejects a ``message`` or ``function_call`` item that keeps
    the id it was produced with once the reasoning item before it is gone
    ("provided without its required 'reasoning' item"); without an id the item
    is plain input, as a client writes it.
    """
    if isinstance(block, dict) and block.get("type") in _LINKED and "id" in block:
        return {k: v for k, v in block.items() if k != "id"}
    return block


def stripped_count(holders: Sequence[int], start: int, keep_recent: int) -> int:
    """How many of the oldest reasoning holders lose their reasoning.

    All but the newest ``keep_recent``, and none at or after ``start`` (the
    unfinished turn): always a prefix of ``holders``, which is sorted.
    """
    unprotected = max(len(holders) - keep_recent, 0) if keep_recent else len(holders)
    return min(unprotected, bisect_left(holders, start))


def strip_reasoning(message: BaseMessage) -> BaseMessage:
    """``message`` without its reasoning (memoised)."""
    return memo_rewrite(message, "strip_thinking", _strip)


def strip_unsigned(message: BaseMessage) -> BaseMessage:
    """``message`` without its reasoning but the signed blocks (memoised)."""
    return memo_rewrite(message, "strip_unsigned_thinking", _strip_unsigned)


def _strip_unsigned(message: BaseMessage) -> BaseMessage:
    return _strip(message, keep_signed=True)


def stripper(keep_signed: bool) -> Callable[[BaseMessage], BaseMessage]:
    """What ``strip_old_thinking`` does to each older reasoning holder."""
    return strip_unsigned if keep_signed else strip_reasoning


def cut_cost_view(message: BaseMessage) -> BaseMessage:
    """``message`` as a cut plans it: an assistant message without its reasoning.

    Before a cut drops an assistant answer, its reasoning goes
    (``_trim.fit_cut``), so what the answer takes is planned without it. A
    message with tool calls is planned the same way, although an unfinished
    tool-use turn sends its reasoning: the plan may only under-weigh what the cut
    then measures (the cut moves on until the measure fits), never over-weigh it,
    or a prepared output, merged by hygiene (an answer joined to the tool calls
    after it), would plan over its own budget and be cut again
    (``prepare(prepare(x)) == prepare(x)``).
    """
    if isinstance(message, AIMessage) and has_reasoning(message):
        return strip_reasoning(message)
    return message


def fit_answers(
    kept: list[BaseMessage],
    budget: int,
    measure: Callable[[list[BaseMessage]], int],
    squeeze: Callable[[list[BaseMessage]], list[BaseMessage]] | None,
) -> tuple[list[BaseMessage], int, bool]:
    """What a cut keeps, ``squeeze``d and then stripped of reasoning if over.

    Reasoning goes before the answers it led to (``cut_cost_view``), outside
    an unfinished tool-use turn. Returns the messages, what ``measure`` gives
    them, and whether they changed.
    """
    total, changed = measure(kept), False
    if total > budget and squeeze is not None:
        smaller = squeeze(kept)
        if smaller is not kept:
            changed, kept, total = True, smaller, measure(smaller)
    if total > budget:
        bare = strip_old_thinking(kept, keep_recent=0)
        if bare is not kept:
            changed, kept, total = True, bare, measure(bare)
    return kept, total, changed


def strip_old_thinking(
    messages: Sequence[BaseMessage], *, keep_recent: int = 1, keep_signed: bool = False
) -> list[BaseMessage]:
    """Remove reasoning from all but the newest ``keep_recent`` assistant messages.

    Handles Anthropic ``thinking``/``redacted_thinking`` blocks, standard
    ``reasoning`` blocks and ``reasoning_content``/``reasoning`` in
    ``additional_kwargs``. A block is removed whole, never edited (signatures stay
    valid). Reasoning inside the current, unfinished tool-use turn is kept, since
    Anthropic requires it there. ``keep_signed``: signed blocks stay (the module
    docstring says why).
    """
    holders = [i for i, m in enumerate(messages) if has_reasoning(m)]
    count = stripped_count(holders, running_turn_start(messages), keep_recent)
    if not count:
        return messages if isinstance(messages, list) else list(messages)
    strip, changed = stripper(keep_signed), False
    out = list(messages)
    for i in holders[:count]:
        out[i] = strip(out[i])
        changed = changed or out[i] is not messages[i]
    if not changed and isinstance(messages, list):
        return messages
    return out
