"""What ``GuardPolicy.interactive_tuning`` sets once a person replies.

A history holds a reply once a user message follows an assistant message that
made no tool call (``_messages.holds_reply``); ``ContextGuard.policy_for`` then
gives the policy with ``for_replies`` applied, in the reference and in
``prepare`` alike. A user message the application's own code sends (a nudge to
go on, a harness's format error) is no reply once marked with ``app_message``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from ._errors import InvalidInputError
from ._messages import APP_MESSAGE, is_app_message, marker, with_marker

if TYPE_CHECKING:
    from ._policy import GuardPolicy

INTERACTIVE: dict[str, Any] = {
    "digest": True,
    "digest_form": "turns",
    "prune_to": 0.5,
    "keep_recent_tool_results": 4,
}
"""What ``interactive_tuning`` sets once a history holds a reply."""
INTERACTIVE_ARCHIVED: dict[str, Any] = {
    **INTERACTIVE,
    "digest_share": 0.45,
    "digest_max_tokens": 12_000,
    "prune_to": 0.2,
}
"""... and with archived results (``archived_results``, ``with_archive``).

The turns take most of what a pruning keeps: 0.45 of the budget (up to 12,000
tokens, not 4,000) for the trimmed turns cut down to their calls, text and
placeholders naming keys, and 0.2 for whole messages. With the outputs one read
away, the prompt keeps the conversation's own steps rather than whole old
outputs. On the Claude Code conversations by half, against the default guard
without an archive (BENCHMARKS.md, the per-family ``archive`` rows): 16k +2.45 /
+1.59 content points, -3.2 / -4.4 needle points sent (every needle
recoverable), +0.040x / +0.018x billed; 32k +0.00 / +0.90, +1.6 / +0.0,
-0.012x / -0.003x. The multi-tool set with an archive keeps 96.75% at 16k
(95.70% with ``INTERACTIVE`` after a reply).
"""
_TOGETHER = (
    {"digest", "digest_form"},
    {"digest_share", "digest_max_tokens"},
    {"prune_to"},
    {"keep_recent_tool_results"},
)
"""Fields set together: a policy that sets one of a group keeps the group as set."""


def for_replies(policy: GuardPolicy, *, persist: bool = False) -> dict[str, Any]:
    """The ``INTERACTIVE`` fields ``policy`` leaves unset (a history with a reply).

    With archived results, those of ``INTERACTIVE_ARCHIVED``. What
    ``with_archive`` filled in counts as unset (``chosen_fields``) and goes back
    to its default where these settings set nothing: after a reply an archived
    policy is tuned as ``INTERACTIVE_ARCHIVED`` says, whatever the archive's own
    note and depth were before it. ``persist``: the output becomes the stored history
    (``prepare(persist=True)``), so ``keep_reply`` too, unless set: the reply
    the settings switched on stays in what comes back.
    """
    given = policy.chosen_fields
    settings = INTERACTIVE_ARCHIVED if policy.archived_results else INTERACTIVE
    update = {
        field: settings[field]
        for group in _TOGETHER
        if not group & given
        for field in sorted(group)
        if field in settings
    }
    fields = type(policy).model_fields
    filled = policy.model_fields_set - given
    update = {**{f: fields[f].default for f in sorted(filled)}, **update}
    if persist and "keep_reply" not in given:
        update["keep_reply"] = True
    return update


def app_message(message: BaseMessage) -> HumanMessage:
    """A copy of a user message marked as the application's own, not a person's.

    For the user messages an application's code sends between steps (a nudge
    to go on, a harness's answer to a malformed reply): ``interactive_tuning``
    switches on a person's reply, and these are none. ``message`` itself if it
    is marked already.

    Raises:
        InvalidInputError: ``message`` is no user message, or one the guard
            wrote or marked otherwise.
    """
    if not isinstance(message, HumanMessage):
        raise InvalidInputError(
            f"app_message marks user messages, got a {message.type!r} message.",
            hint="pass the HumanMessage your code sends (a nudge, a format error).",
        )
    if is_app_message(message):
        return message
    mark = marker(message)
    if mark is not None:
        raise InvalidInputError(
            f"Cannot mark a message marked {mark.get('kind')!r} as the app's.",
            hint="mark the message your code wrote before pinning it; "
            "a message the guard wrote is no reply already.",
        )
    marked = with_marker(message, APP_MESSAGE)
    assert isinstance(marked, HumanMessage)
    return marked
