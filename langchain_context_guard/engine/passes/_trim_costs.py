"""What each message costs the trim's plan (``_trim_sizes.Costs``).

The plan (``_trim_plan.plan_cut``) weighs a message at its size as sent now
and at its size for good (an old result ends up compressed), so ``message_costs``
reads the compression the guard will apply, the stand-in a result is sent as
while its call is open, and the pointer a superseded read is sent as.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from langchain_core.messages import BaseMessage, ToolMessage

from .._result_keys import Naming
from ._compress import callers
from ._hygiene import tidy_message
from ._repair import call_name, stand_in_named
from ._supersede import supersede_message
from ._thinking import cut_cost_view
from ._trim_sizes import Costs


def message_costs(
    messages: list[BaseMessage],
    i: int,
    count: Callable[[BaseMessage], int],
    compress: Callable[[BaseMessage], BaseMessage],
    assistant: bool,
    twins: dict[str, int],
    newer: Mapping[int, str] | None = None,
    name_source: Naming = False,
) -> Costs:
    """``_trim_sizes.Costs`` of ``messages[i]``: raw, for good, is a result, twin.

    As sent (an empty result as its placeholder). A result's cost for good
    also takes off what compressing its ``callers`` saves (with ``assistant``,
    ``compress_assistant_text``): the two go together. Its twin is the
    synthetic result it is sent as while not in yet (by tool name, counted once
    into ``twins``). A superseded result (in ``newer``, ``_supersede``) costs
    its pointer alone (naming its key or call id with ``name_source``, as
    ``supersede_message`` writes it), and counts in no compression batch: no
    result to the plan.
    """
    m = messages[i]
    if not isinstance(m, ToolMessage):
        return _plain(count(cut_cost_view(m)))
    m = tidy_message(m) or m
    later = newer.get(i) if newer else None
    if later is not None:
        return _plain(count(supersede_message(m, later, name_source=name_source)))
    good = count(compress(m))
    if assistant:
        for j in callers(messages, i):
            good -= count(messages[j]) - count(compress(messages[j]))
    name = call_name(messages, i)
    twin = twins.get(name)
    if twin is None:
        twin = twins[name] = count(stand_in_named(name))
    return count(m), good, True, twin


_PLAIN: dict[int, Costs] = {}
_PLAIN_MAX = 8_192


def _plain(tokens: int) -> Costs:
    """The costs of a message that is no tool result: one object per count.

    A pruning keeps the costs of every message; most are these, and a long
    history holds many messages of the same size.
    """
    costs = _PLAIN.get(tokens)
    if costs is None:
        if len(_PLAIN) >= _PLAIN_MAX:
            _PLAIN.clear()
        costs = _PLAIN[tokens] = (tokens, tokens, False, 0)
    return costs
