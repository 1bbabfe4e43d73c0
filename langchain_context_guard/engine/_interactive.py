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
_TOGETHER = ({"digest", "digest_form"}, {"prune_to"}, {"keep_recent_tool_results"})
"""Fields set together: a policy that sets one of a group keeps the group as set."""


def for_replies(policy: GuardPolicy, *, persist: bool = False) -> dict[str, Any]:
    """The ``INTERACTIVE`` fields ``policy`` leaves unset (a history with a reply).

    What ``with_archive`` filled in counts as unset (``chosen_fields``) and
    goes back to its default where ``INTERACTIVE`` sets nothing: after a reply
    an archived policy is tuned as it would be without the archive, its markers
    and digest naming keys. ``persist``: the output becomes the stored history
    (``prepare(persist=True)``), so ``keep_reply`` too, unless set: the reply
    the settings switched on stays in what comes back.
    """
    given = policy.chosen_fields
    update = {
        field: INTERACTIVE[field]
        for group in _TOGETHER
        if not group & given
        for field in sorted(group)
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
