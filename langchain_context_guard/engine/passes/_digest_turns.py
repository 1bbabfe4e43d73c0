"""The digest as the trimmed turns themselves, cut down (``digest_form="turns"``).

Instead of a user-role note listing the calls of trimmed turns, the newest of
those turns stay where they were, in the assistant's own role and the shape every
provider takes: each assistant message that made tool calls keeps its calls (a
long text argument, such as a written file, to its first and last lines, as
compression leaves it; a call's only argument, such as a shell command, whole)
and its text as compression leaves it (a long one to its first line), and each
of its results becomes a one-line placeholder ("cleared"), naming its archive key
when results are archived, or, when short (plain text within the compression
floor, not cut before), stays whole, as compression leaves it: its placeholder
would save little, and the values a short output holds (a count, a line number,
an exit status) are what a later step asks for. What an agent reuses from its
old steps, the paths, commands and names it wrote, stays in the prompt for a
dozen tokens a result, and nothing the conversation wrote is quoted into a user
message. The turns are taken newest first within the room the trim left, and
built from the dropped messages alone, so the same cut gives byte-identical
messages. A turn whose assistant message still carries reasoning or signatures
is left out (providers check those against what they signed), as is an answer
that made no call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._messages import marker, text_of, with_marker
from .._policy import GuardPolicy
from .._result_keys import Naming, naming, pointer
from ._compress import (
    compress_floor,
    compress_message,
    cut_call_args,
    is_signed_turn,
    too_short,
)
from ._text import where

CLEARED = "cleared"
"""``MARKER_KEY`` kind of a result the turns digest stands in for with one line."""


@dataclass(frozen=True, slots=True)
class TurnsForm:
    """How the turns digest cuts a turn down: a policy's compression settings.

    ``min_chars``: texts at or below it stay whole (``compress_floor``);
    ``lines``: head and tail lines a long argument keeps; ``name_source``: what
    a placeholder names its result by (``_result_keys.Naming``).
    """

    min_chars: int
    lines: tuple[int, int]
    name_source: Naming = False


def turns_form(
    policy: GuardPolicy, window: int, ordinals: Mapping[str, int] | None = None
) -> TurnsForm | None:
    """A policy's ``TurnsForm`` (None: its digest is the note)."""
    if policy.digest_form != "turns":
        return None
    return TurnsForm(
        compress_floor(policy, window),
        (policy.compress_head_lines, policy.compress_tail_lines),
        naming(policy.archived_results, ordinals),
    )


def cleared_result(message: ToolMessage, source: str | None) -> BaseMessage:
    """``message`` as a one-line placeholder; ``source``: the key to read it back."""
    if (marker(message) or {}).get("kind") == CLEARED:
        return message
    text = f"[output cleared by context guard to fit the context window{where(source)}]"
    return with_marker(
        message, CLEARED, content=text, original_chars=len(text_of(message.content))
    )


def _stand_in(result: ToolMessage, form: TurnsForm) -> BaseMessage:
    """What the turns digest sends for one of its turns' results.

    A one-line placeholder, or the result itself when it is short (plain text
    within the compression floor, not cut before): compression leaves it whole,
    and its placeholder would save little.
    """
    if too_short(result, form.min_chars) and not marker(result):
        return result
    return cleared_result(result, pointer(result, form.name_source))


def cut_turn(
    message: AIMessage,
    min_chars: int,
    lines: tuple[int, int],
    name_source: Naming,
) -> BaseMessage:
    """An assistant message as the turns digest keeps it: its calls, cut down.

    Its text as compression leaves it, and its calls' long text arguments cut to
    ``lines`` (head and tail), also when compression cut its text before (and
    left its calls whole); never a cut of a cut.
    """
    turn = compress_message(message, min_chars, *lines, name_source, call_args=True)
    if turn is not message:
        return turn
    return cut_call_args(message, min_chars, lines, archived=name_source is not False)


def _units(dropped: Sequence[BaseMessage]) -> Iterator[range]:
    """Each assistant message that made calls, then their results, newest first.

    The results that follow it, one for each of its calls (repair put them
    there); a turn answered otherwise, or signed, is left out. Read from the
    end as far as the caller takes them: a digest weighs only the newest.
    """
    end = len(dropped)  # the first message after the results of the one at ``i``
    for i in range(len(dropped) - 1, -1, -1):
        message = dropped[i]
        if isinstance(message, ToolMessage):
            continue
        if isinstance(message, AIMessage) and message.tool_calls:
            asked = sorted(str(c.get("id") or "") for c in message.tool_calls)
            given = sorted(
                str(getattr(m, "tool_call_id", "")) for m in dropped[i + 1 : end]
            )
            if given == asked and "" not in asked and not is_signed_turn(message):
                yield range(i, end)
        end = i


def cleared_turns(
    dropped: Sequence[BaseMessage],
    form: TurnsForm,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
) -> list[tuple[int, BaseMessage]]:
    """The newest ``dropped`` turns, cut down as ``form`` says, within ``max_tokens``.

    Each message with its index in ``dropped``, oldest first: an assistant
    message, then its results, each as ``_stand_in`` sends it: a placeholder
    (naming the key or id to read the output back with, when ``form`` names
    sources) or, when short, the result itself. Empty when none fits.
    """
    return chosen_turns(dropped, form, max_tokens=max_tokens, count=count).made


@dataclass(frozen=True, slots=True)
class Chosen:
    """The turns ``cleared_turns`` sends, and the first place of ``dropped`` it read.

    The turns are weighed newest first up to the first that does not fit: what
    came before that one does not change the choice. When every turn fits,
    which turns there are (a signed one is left out) depends on all of
    ``dropped``: ``read_from`` is 0. A grown guard that lets go of old rewrites
    (``incremental._release``) keeps those it read.
    """

    made: list[tuple[int, BaseMessage]]
    read_from: int


def chosen_turns(
    dropped: Sequence[BaseMessage],
    form: TurnsForm,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
) -> Chosen:
    """``cleared_turns``, and the first place of ``dropped`` its choice read."""
    names = form.name_source
    kept: list[list[tuple[int, BaseMessage]]] = []
    used, read = 0, 0
    for unit in _units(dropped):
        ai = dropped[unit[0]]
        assert isinstance(ai, AIMessage)
        turn = [(unit[0], cut_turn(ai, form.min_chars, form.lines, names))]
        for j in unit[1:]:
            result = dropped[j]
            assert isinstance(result, ToolMessage)
            turn.append((j, _stand_in(result, form)))
        cost = sum(count(m) for _, m in turn)
        if used + cost > max_tokens:
            read = unit[0]
            break
        kept.append(turn)
        used += cost
    return Chosen([pair for turn in reversed(kept) for pair in turn], read)
