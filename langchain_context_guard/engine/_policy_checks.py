"""``GuardPolicy``'s checks across fields, run once it is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from ._errors import ConfigError, unknown_setting

_TURN_LIMIT_HINT = (
    "use a number of user turns, at least 1; for no limit, leave the setting out."
)
MIN_BUDGET_TOKENS = 64
"""Least budget (window minus reserve) a policy may leave: a minimal turn (the
placeholder first turn, 22 tokens; a short user message; the reply priming)."""


class Checked(Protocol):
    """The ``GuardPolicy`` fields these checks read."""

    context_window: int | None
    default_context_window: int
    hard_min_tokens: int
    truncate_head_chars: int
    truncate_tail_chars: int
    max_tool_result_chars: int
    digest: bool
    digest_form: Literal["note", "turns"]

    @property
    def model_fields_set(self) -> set[str]: ...

    def reserve(self, window: int) -> int: ...


def check_consistency(self: Checked) -> None:
    """Refuse settings that cannot work together, naming the fields and the fix."""
    window = self.context_window
    reserve = self.reserve(window or self.default_context_window)
    left = (window or self.default_context_window) - reserve
    short = (
        f"leaves a budget of {left:,} tokens, under the {MIN_BUDGET_TOKENS} "
        "a minimal turn needs"
    )
    if window is not None and left < MIN_BUDGET_TOKENS:
        if "reserve_tokens" not in self.model_fields_set:  # blame what was set
            raise ConfigError(
                f"GuardPolicy.context_window ({window:,}) {short}: the reply "
                f"reserve (reserve_tokens, default {reserve:,}) takes the rest.",
                field="context_window",
                hint="set context_window to the model's real window "
                f"(at least {self.hard_min_tokens:,}), or set reserve_tokens too.",
            )
        raise ConfigError(
            f"GuardPolicy.reserve_tokens ({reserve:,}) must be smaller than "
            f"context_window ({window:,}): it {short}.",
            field="reserve_tokens",
            hint="lower reserve_tokens or raise context_window.",
        )
    if window is None and left < MIN_BUDGET_TOKENS:
        raise ConfigError(
            f"GuardPolicy.reserve_tokens ({reserve:,}) {short} of the default "
            f"window ({self.default_context_window:,} tokens).",
            field="reserve_tokens",
            hint="set reserve_tokens to the longest reply expected (e.g. 8192), "
            "or set context_window.",
        )
    if self.digest_form != "note" and not self.digest:
        raise ConfigError(
            f"GuardPolicy.digest_form ({self.digest_form!r}) says what the digest "
            "is, but the digest is off (digest=False).",
            field="digest_form",
            hint="set digest=True too, or leave digest_form at 'note'.",
        )
    if (
        self.truncate_head_chars + self.truncate_tail_chars
        >= self.max_tool_result_chars
    ):
        raise ConfigError(
            "GuardPolicy.truncate_head_chars + truncate_tail_chars "
            f"({self.truncate_head_chars + self.truncate_tail_chars:,}) must be "
            f"below max_tool_result_chars ({self.max_tool_result_chars:,}).",
            field="truncate_head_chars",
            hint="lower truncate_head_chars/truncate_tail_chars or raise "
            "max_tool_result_chars.",
        )


def config_error(
    exc: ValidationError, fields: Mapping[str, Any], owner: str = "GuardPolicy"
) -> ConfigError:
    """The first of pydantic's errors as a ``ConfigError`` naming the field.

    A nested model's own ``ConfigError`` (a ``ToolPolicy`` in ``tool_policies``)
    keeps its hint, with the place it was written in front.
    """
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or owner
    if err["type"] == "extra_forbidden":
        return unknown_setting(owner, field, fields)
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, ConfigError):
        said = str(cause).removesuffix(f" Fix: {cause.hint}")
        inner = f"{field}.{cause.field}" if cause.field else field
        return ConfigError(f"{owner}.{field}: {said}", field=inner, hint=cause.hint)
    given = err.get("input")
    shown = "" if isinstance(given, dict) else f" (got {given!r})"
    hint = f"set {field} to a valid value; see {owner}'s field docs."
    if field.startswith("history_limit"):
        hint = _TURN_LIMIT_HINT
    return ConfigError(f"{owner}.{field}: {err['msg']}{shown}.", field=field, hint=hint)
