"""``CompactionSettings``: when to compact, what to keep, how patient to be.

One frozen pydantic model, validated at construction; a bad value raises
``ConfigError`` naming the field (the sizes' own checks live in ``_check_sizes``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..adapters import check_prefix
from ..engine import ConfigError, unknown_setting
from ._plan import Mode
from ._trigger import ContextSize, TriggerClause, check_size_types, clauses

__all__ = ["CompactionSettings"]


class CompactionSettings(BaseModel):
    """When to compact, what to keep, and how patient to be with the summarizer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trigger: (
        ContextSize
        | TriggerClause
        | list[ContextSize | TriggerClause]
        | Literal["auto"]
        | None
    ) = Field(
        "auto",
        description="When to compact, in LangChain's forms: ('tokens', N), "
        "('fraction', f) of the window, ('messages', n), a dict clause such as "
        "{'tokens': 4000, 'messages': 10} (all reached), or a list (any reached). "
        "'auto': the lower of 0.8 of the window and window - "
        "reserve_tokens. None: never (as in LangChain); the "
        "deterministic passes still fit each call.",
    )
    background_at: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Start the summary in the background once the history reaches "
        "this share of the token trigger (an asyncio task on async hosts, a "
        "thread otherwise), and use it at the trigger when the messages it "
        "summarised still open the history. None: summarise at the trigger.",
    )
    keep: ContextSize = Field(
        ("tokens", 20_000),
        description="Newest history kept verbatim; capped at half the token "
        "trigger so one compaction always makes room.",
    )
    keep_user_tokens: int = Field(
        0,
        ge=0,
        description="Tokens of the user's own messages from the summarised range "
        "kept verbatim after the summary (the newest first when they exceed it; "
        "counted in the history like any message). 0: off, the summary alone "
        "carries them (the original request stays verbatim either way).",
    )
    mode: Mode = Field(
        "keep_recent",
        description="'rebuild' keeps only system + summary + latest user message "
        "(a session that restarts from the summary).",
    )
    timeout: float | None = Field(
        60.0, gt=0, description="Seconds for the whole summary, retries included."
    )
    retries: int = Field(2, ge=0, description="Extra attempts after a failed call.")
    retry_delay: float = Field(
        1.0, ge=0, description="Seconds before retry k, doubled each time."
    )
    max_consecutive: int = Field(
        2,
        ge=1,
        description="Failed compactions in a row before compaction pauses until "
        "the history grows by `keep` again (longer after each further failure). "
        "A successful summary always waits for that growth before the next.",
    )
    summary_mode: Literal["serialize", "append"] = Field(
        "serialize",
        description="'serialize': the summarized messages as quoted text in a "
        "prompt of their own. 'append': the conversation as the agent sends it "
        "(its system prompt and tools too, under CompactionMiddleware) plus one "
        "instruction, so the provider reads the input from its prompt cache; "
        "plain text, parsed into the same sections.",
    )
    structured: Literal["auto", "never"] = Field(
        "auto", description="Ask for structured output when the model supports it."
    )
    max_input_chars: int = Field(
        4_000, ge=500, description="Characters of each message the summarizer sees."
    )
    max_prompt_chars: int = Field(
        300_000,
        ge=10_000,
        description="Characters of conversation in one summary call (about 80k "
        "tokens by default); a longer range is summarised in parts that fit, "
        "then merged.",
    )
    max_request_chars: int = Field(
        16_000,
        ge=500,
        description="The verbatim original request is cut beyond this (the task "
        "is what a summary must not lose: one replayed SWE-bench task has 9,065 "
        "characters).",
    )
    instructions: str | None = Field(
        None, description="Extra focus appended to the summary prompt."
    )
    messages_key: str = Field("messages", description="The state key of messages.")
    namespace_prefix: tuple[str, ...] = Field(
        (),
        description="Store labels before the archive's own, to keep one user's "
        "or tenant's archives apart: ('tenants', '{user_id}'); a label written "
        "'{key}' is filled from config['configurable'][key] at run time (when "
        "the config lacks it, nothing is archived or recalled).",
    )

    @field_validator("namespace_prefix", mode="before")
    @classmethod
    def _check_prefix(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, tuple | list):
            raise ValueError(
                "must be a tuple of strings such as ('tenants', '{user_id}')"
            )
        return check_prefix(value, field="namespace_prefix")

    @field_validator("trigger", "keep", mode="before")
    @classmethod
    def _check_size_types(cls, value: Any) -> Any:
        check_size_types(value)
        return value

    @field_validator("trigger", "keep")
    @classmethod
    def _check_sizes(cls, value: Any) -> Any:
        for clause in clauses(value):
            if not clause:
                raise ValueError("a trigger clause needs at least one size")
            for kind, size in clause.items():
                if kind == "fraction" and not 0 < size <= 1:
                    raise ValueError(f"a fraction must be in (0, 1], got {size}")
                if kind != "fraction" and size <= 0:
                    raise ValueError(f"{kind} must be positive, got {size}")
        return value

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "settings"
            if err["type"] == "extra_forbidden":
                fields = type(self).model_fields
                raise unknown_setting(
                    "CompactionSettings", name, fields, "docs/compaction.md"
                ) from None
            why = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigError(
                f"CompactionSettings.{name}: {why} (got {err.get('input')!r}).",
                field=name,
                hint=f"see CompactionSettings.{name}'s description.",
            ) from None
