"""What ``GuardPolicy.interactive_tuning`` sets once a person replies.

A history holds a reply once a user message follows an assistant message that
made no tool call (``_messages.holds_reply``); ``ContextGuard.policy_for`` then
gives the policy with ``for_replies`` applied, in the reference and in
``prepare`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._policy import GuardPolicy

INTERACTIVE: dict[str, Any] = {
    "digest": True,
    "digest_form": "turns",
    "prune_to": 0.5,
    "keep_recent_tool_results": 4,
}
"""What ``interactive_tuning`` sets once a history holds a reply."""
_TOGETHER = ({"digest", "digest_form"}, {"prune_to"}, {"keep_recent_tool_results"})
"""Fields set together: a policy that sets one of a group keeps the group as set."""


def for_replies(policy: GuardPolicy) -> dict[str, Any]:
    """The ``INTERACTIVE`` fields ``policy`` leaves unset (a history with a reply)."""
    given = policy.model_fields_set
    return {
        field: INTERACTIVE[field]
        for group in _TOGETHER
        if not group & given
        for field in sorted(group)
    }
