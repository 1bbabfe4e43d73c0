"""What a run of the passes depends on, and what a call keeps for the next one.

``CallKey`` and ``RunKey``: what a kept prompt or record is valid for;
``Record``: the last call's history and the step of every pass over it, grown by
the next call. A run's ``Setting`` (budget, window, counter, calibration) is the
reference's, from ``passes._setting``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from .._policy import GuardPolicy
from ._extends import extends_unchanged
from ._steps import Step


class CallKey(NamedTuple):
    """What a call's output depends on besides the messages.

    A conversation's previous prompt is re-sent (``_stable_prefix``), and the
    last call's steps grown (``Record``), only under the same key.
    """

    policy: GuardPolicy
    counter: Any
    budget: int
    window: int
    turn_limit: int | None
    extra: int
    """Tokens sent besides the messages: tool schemas and reply priming."""

    def counts_alike(self, other: CallKey) -> bool:
        """Whether per-message results carry over: same policy, same counter."""
        return self.policy == other.policy and self.counter == other.counter


class RunKey(NamedTuple):
    """What one run of the passes depends on: the call, and the try's setting."""

    call: CallKey
    budget: int
    digest: int
    exact: bool
    hold: bool = True


Memo = dict[str, Any]
"""Per-message results a pass keeps for the next call: name -> (messages, results)."""


@dataclass(frozen=True)
class Record:
    """A guard's last call: its history, and the step of every pass over it."""

    key: RunKey
    original: list[BaseMessage]
    contents: list[Any]
    body: int
    usage_at: int
    usage_body: int
    calls: int
    """How many assistant messages it holds (``_messages.assistant_count``)."""
    steps: tuple[Step, ...]
    memo: Memo = field(default_factory=dict)
    """The run's per-message results (``Run.memo``)."""
    forgot: int = 0
    """How many of ``original``'s first messages ``_release`` let go of."""

    def grows(
        self, messages: list[BaseMessage], base: list[BaseMessage] | None = None
    ) -> bool:
        """Whether ``messages`` starts with this history, unchanged.

        ``contents``: those of its last messages (``_extends.recent_contents``).
        ``base``: a history ``messages`` is known to extend unchanged.
        """
        if base is self.original:
            return True
        return extends_unchanged(messages, self.original, self.contents)
