"""``GuardPolicy``: every knob of the guard, validated at construction."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)

from ._archive_defaults import ARCHIVE_DEFAULTS, NOTE_ONLY
from ._errors import ConfigError
from ._policy_checks import check_consistency, config_error
from ._settings import load_settings, policy_block
from ._tool_policy import ToolPolicy, check_tool_keys
from ._window import default_reserve


class GuardPolicy(BaseModel):
    """How the guard budgets, prunes and repairs a history.

    Each field says why its default is what it is (BENCHMARKS.md has the figures):
    the pruning depth comes from a cost model of prompt caching, and the digest is
    off, since the library's own notes do not count as kept content.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    _archive_filled: frozenset[str] = PrivateAttr(default_factory=frozenset)

    enabled: bool = Field(True, description="Turn the guard off without unwiring it.")
    context_window: int | None = Field(
        None,
        gt=0,
        validation_alias=AliasChoices(
            "context_window", "contextWindowOverride", "contextWindow"
        ),
        description="Explicit window in tokens; overrides the model's profile and "
        "the built-in table.",
    )
    default_context_window: int = Field(
        128_000, gt=0, description="Window used when nothing else says."
    )
    reserve_tokens: int = Field(
        8_192,
        ge=0,
        validation_alias=AliasChoices("reserve_tokens", "reserveTokens"),
        description="Tokens kept free for the reply; budget = window - reserve. "
        "Unset: an eighth of the window, at most 8,192 (``reserve``).",
    )
    hard_min_tokens: int = Field(16_000, ge=0, description="Refuse windows below this.")
    warn_below_tokens: int = Field(
        32_000, ge=0, description="Warn for windows below this."
    )
    model: str | None = Field(
        None, description="Model name: picks the tiktoken encoding and window."
    )
    max_tool_result_chars: int = Field(
        50_000,
        gt=0,
        validation_alias=AliasChoices("max_tool_result_chars", "maxToolResultChars"),
        description="Tool results longer than this are cut to head + tail.",
    )
    truncate_head_chars: int = Field(
        2_000,
        ge=0,
        validation_alias=AliasChoices("truncate_head_chars", "truncateHeadChars"),
        description="Characters kept from the start of a truncated tool result.",
    )
    truncate_tail_chars: int = Field(
        2_000,
        ge=0,
        validation_alias=AliasChoices("truncate_tail_chars", "truncateTailChars"),
        description="Characters kept from the end of a truncated tool result.",
    )
    max_tool_result_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="No one tool result may take more than this share of the budget "
        "(cut to head + tail like max_tool_result_chars). Why 0.1: up to "
        "keep_recent_tool_results + compress_batch = 7 results are whole at once "
        "(the newest, and those waiting for their batch), and together they must "
        "fit in what a pruning keeps (prune_to = 0.7 of the budget): 0.7 / 7. A "
        "larger result crowds older turns out and brings the next pruning, which "
        "re-bills the prompt, forward. Replay at 16k: 98.49% content evidence at "
        "0.71x billed; 0.2: 98.09% at 0.74x; 0.05: 97.56% at 0.67x with 5 needle "
        "points fewer. 32k: 0.860x against 0.866x for 0.2, about the same "
        "evidence; 128k: unchanged.",
    )
    dedupe_call_text: bool = Field(
        True,
        description="Drop from assistant messages the fenced code blocks that repeat "
        "one of their tool calls' arguments verbatim (agents that write their "
        "action as text to be parsed, like ReAct or mini-swe-agent, send every "
        "command twice). Lossless: the call still carries it. On the shared "
        "trajectories the copy is 76k of the 458k tokens the agent wrote, room "
        "that holds older turns instead.",
    )
    max_chars_per_message: int | None = Field(
        None,
        gt=0,
        description="A cap on any single user/assistant/tool message text.",
    )
    tool_policies: dict[str, ToolPolicy] = Field(
        default_factory=dict,
        description="Per tool name (a result's ToolMessage.name), its own "
        "truncation cap, whether it is never compressed, how many of its newest "
        "results stay whole, the argument whose repeat supersedes an older "
        "result, and whether its calls are dropped last (ToolPolicy). A key with "
        "*, ? or [ is a pattern of names (fnmatch, case-sensitive: "
        "'mcp__github__*'); an exact name wins over patterns, and among patterns "
        "the first that matches, in this mapping's order.",
    )
    exclude_tools: tuple[str, ...] = Field(
        (),
        description="Tools whose results are never truncated or compressed; "
        "patterns too ('mcp__*'), as in tool_policies.",
    )
    keep_recent_tool_results: int = Field(
        3,
        ge=0,
        description="Newest tool results kept whole. Rather than 6: on the replay "
        "3 keeps the same evidence within 0.3 points and bills less at every window.",
    )
    compress_min_chars: int = Field(500, ge=0, description="Shorter stays whole.")
    compress_min_share: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="Nor is a message compressed below this share of the budget "
        "(characters at chars_per_token): compressing it saves at most that, and "
        "small outputs hold the values and line numbers asked for later. 32k "
        "replay: needles 94.8% -> 96.7% for 0.846x -> 0.866x billed (16k: the "
        "floor of compress_min_chars decides).",
    )
    compress_head_lines: int = Field(3, ge=0, description="Head lines kept.")
    compress_tail_lines: int = Field(2, ge=0, description="Tail lines kept.")
    compress_assistant_text: bool = Field(
        True,
        description="Compress with each old result the text of the assistant "
        "message that made its call (its tool calls stay whole): the commands an "
        "agent ran hold most names it reuses, its prose most of its tokens, so "
        "old turns are kept as commands before whole turns are dropped. Replay: "
        "98.49% / 99.92% content evidence at 0.71x / 0.86x billed (16k / 32k); "
        "off: 97.01% / 99.74% at 0.71x / 0.88x.",
    )
    compress_call_args: bool = Field(
        False,
        description="With compress_assistant_text, also cut that message's calls' "
        "long text arguments (a written file's content, an edit's strings) to "
        "their first and last lines, as results are; a call's only argument (a "
        "shell command) is the call itself and stays, and so do the calls of a "
        "message with reasoning or signatures. Replay per family: on OpenHands the "
        "same content for 0.02-0.05x less billed at 16k and 32k; on the Claude "
        "Code conversations more content at 16k but less at 32k, so off by default.",
    )
    archived_results: bool = Field(
        False,
        description="The full text of cut tool results is archived (an adapter's "
        "ResultArchive sets this): their markers, and the digest for each trimmed "
        "result, name its key (#12: its place among the history's tool results) "
        "to read it back with read_tool_result, counted in the budget like the "
        "rest.",
    )
    compress_batch: int = Field(
        4,
        ge=1,
        description="Compress old results once this many more have piled up, so "
        "old messages change rarely and prompt caches keep hitting; the cut never "
        "moves back, so each batch leaves the window short by what it saved: 4 "
        "keeps that dip small (8: +1% billed at 32k, -0.7 points evidence at 16k).",
    )
    compress_trigger: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Compress old tool results only once the history passes this "
        "share of the budget (0: always). At 0.5 a history with "
        "room to spare is sent whole (128k replay: 100% of evidence instead of "
        "99.3%), and at 32k it keeps the evidence target that always compressing "
        "misses with trim_step 0.5.",
    )
    keep_recent_thinking: int = Field(1, ge=0, description="Newest N keep reasoning.")
    keep_first_user: bool = Field(True, description="Keep the first user message.")
    bound_thinking: bool | None = Field(
        None,
        description="Whether the model binds signed reasoning (``thinking`` with "
        "a signature, ``redacted_thinking``) to the prompt that produced it. "
        "True: a block whose prefix is no longer that prompt (the guard's last "
        "prompt plus what was added since) is dropped outside the running tool "
        "loop, and, without stable_prefix, signed blocks are left out of the "
        "strip of old reasoning. False: signed reasoning is stripped like any "
        "other. None (the default): per model, from the documented table "
        "(``BINDING_MODELS``: Claude Fable 5.1) and the models whose binding "
        "error the guard has seen. Every model keeps the running tool loop's "
        "reasoning: Anthropic requires it in the final assistant turn.",
    )
    trim_step: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="Cut points lie every this share of the budget of droppable "
        "history (counted as written), so the cut moves rarely and the kept "
        "prefix stays cacheable: each move re-sends everything after it. 0 cuts "
        "exactly what is needed.",
    )
    cache_ttl_seconds: float | None = Field(
        None,
        gt=0,
        description="The provider's prompt-cache lifetime (e.g. 300 for Anthropic's "
        "5 minutes). With stable_prefix and prepare(now=...), a call coming later "
        "than this after its conversation's last one prunes afresh to prune_to at "
        "once (its cache is cold anyway). None: every call assumes a warm cache.",
    )
    stable_prefix: bool = Field(
        True,
        description="Between prunings, send the previous prompt unchanged plus the "
        "new messages for as long as that fits, so the provider's prompt cache "
        "keeps hitting; only a history that no longer fits is pruned again, down "
        "to prune_to of the budget. Off: every call is pruned afresh to the budget "
        "(the same history always gives the same prompt).",
    )
    prune_to: float = Field(
        0.7,
        gt=0,
        le=1,
        description="With stable_prefix, a history that no longer fits is pruned "
        "to at most this share of the budget (plus the digest), leaving room to "
        "grow before the next pruning re-sends the prompt at full price. The share "
        "comes from a cost model (engine.incremental._cost_model.prune_share): a "
        "history growing g tokens a call, pruned from budget B to pB, bills per "
        "kept token of context 2g/((1-p)^2 B) + c (cache rate c = 0.1); worth it "
        "while below an "
        "uncached token: p = 1 - sqrt(2g/(0.9B)), never below 0.3. g is the "
        "history as the prompt holds it (after truncation) per assistant message, "
        "the best predictor of the next cycle's growth of those tried. On the "
        "shared trajectories the model gives 0.54-0.70 at 16k (median 0.68; the "
        "cap binds on 22 of 56 prunings) and about 0.77 at 32k, where the cap "
        "always binds. When what must stay (system prompt, task, newest turn) is "
        "over the share, the pruning keeps just that. Replay, 16k / 32k content "
        "evidence and billed: 0.7 98.49% / 99.92% at 0.71x / 0.86x; 0.6 98.15% / "
        "99.92% at 0.69x / 0.85x. Not lowered for the bill: a cap fitted to "
        "these files would show on others (with an archive, what a pruning cuts "
        "is read back, and ARCHIVE_DEFAULTS lowers it to 0.6).",
    )
    digest: bool = Field(
        False,
        description="Put a note where trimmed turns were: the tool calls they made "
        "and the files and names they mentioned (no model call). Off by default: "
        "a list of names without their content is not content the agent can use, "
        "and the room it takes (digest_share of the budget) holds real turns "
        "instead. Replay at 16k: without it 98.49% content evidence at 0.71x "
        "billed, with it 98.20% at 0.72x (the note's own names excluded). "
        "interactive_tuning turns it on, as the turns, once a person replies.",
    )
    digest_share: float = Field(
        0.15,
        ge=0,
        lt=0.5,
        description="Most of the budget the digest may take (with digest on); "
        "trimming leaves room for it.",
    )
    digest_max_tokens: int = Field(
        4_000,
        ge=0,
        description="Most tokens the digest may take, whatever the budget: past "
        "a few thousand tokens a list of old calls and names helps less than the "
        "messages it would displace.",
    )
    digest_call_chars: int = Field(
        200, ge=20, description="Each tool call in the digest is shortened to this."
    )
    digest_form: Literal["note", "turns"] = Field(
        "note",
        description="What the digest is (with digest on). 'note': one user-role "
        "message listing the trimmed turns' calls and names. 'turns': the newest "
        "trimmed turns themselves, cut down in the assistant's role: each "
        "assistant message that made calls keeps them (long text arguments to "
        "their first and last lines) and its text as compression leaves it, each "
        "result becomes a one-line placeholder (naming its key with archived "
        "results, and a line of keys before them names those whose turn did not "
        "fit), or stays whole when short (within the compression floor); a turn "
        "with reasoning or signatures is left out. "
        "For agents whose calls hold what they reuse (interactive multi-tool "
        "agents: paths, commands, names); it takes room from whole old results, "
        "so fewer of their values stay in the prompt. Replay per family in "
        "BENCHMARKS.md.",
    )
    interactive_tuning: bool = Field(
        True,
        description="Tune a conversation once a person replies: when the history "
        "holds a user message right after an assistant message that made no tool "
        "call, the fields this policy leaves unset (and those with_archive filled "
        "in, which otherwise go back to their defaults) take INTERACTIVE (digest=True, "
        "digest_form='turns', prune_to=0.5, keep_recent_tool_results=4; with "
        "archived results INTERACTIVE_ARCHIVED, whose turns take 0.45 of the "
        "budget, up to 12,000 tokens, and prune_to=0.2), the "
        "settings that keep most on conversations with a person; until then, and "
        "for an agent run to one task's end, the policy as set. The switch takes "
        "effect at the next pruning: the previous prompt is re-sent while it fits, "
        "so the provider's cache keeps hitting. A user message the application's "
        "own code sends after an answer (a nudge to go on, a format error) counts "
        "as a reply unless marked with app_message. Replay per family in "
        "BENCHMARKS.md: on the Claude Code conversations 91.09% content evidence "
        "at 16k (88.62% without) for less billed, on both halves at both windows; "
        "the other families unchanged (no person replies in them).",
    )
    keep_reply: bool = Field(
        False,
        description="The trim keeps a person's newest reply (a user message right "
        "after an answer) and that answer while anything else can go. "
        "prepare(persist=True), as the persist-mode hook and middleware call it "
        "(the output becomes the stored history), turns it on once "
        "interactive_tuning switches, so the history read back still holds it.",
    )
    history_limit: int | None = Field(
        None,
        ge=1,
        description="Keep at most the last N user turns (at least 1; None: no "
        "limit, and 0 or less is refused).",
    )
    history_limits: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="Per session kind (e.g. 'dm', 'group') turn limits; override "
        "history_limit when prepare(session_kind=...) names one. Each is at "
        "least 1 (0 or less is refused); a kind without an entry uses "
        "history_limit.",
    )
    image_tokens: int = Field(
        1_600,
        ge=0,
        description="Token cost of an image or other non-text block where no "
        "provider rule applies: the model is unknown, or the image's size is "
        "(an image by URL).",
    )
    report_usage: bool = Field(
        False,
        description="Count what each adapter call sends by category "
        "(ContextGuard.context_usage) and report it: the context_guard.usage "
        "custom event, and the middleware's reply metadata. Off: no extra count.",
    )
    usage_notices: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(
        (),
        description="Fractions of the window (e.g. (0.5, 0.75)) past which the "
        "middleware tells the model, in a note at the end of its prompt, how full "
        "its context is (not a model that binds signed reasoning: the next call "
        "leaves the note out, which would make the reply's block stale). Empty "
        "(the default): no note.",
    )
    usage_anchoring: bool = Field(
        True,
        description="Count the prefix up to an AIMessage with usage_metadata as the "
        "provider reported it.",
    )
    safety_margin: float = Field(
        0.03,
        ge=0,
        lt=1,
        description="Share of its estimated tokens a history is taken to be larger "
        "by when deciding what fits, once provider usage calibrates the counts: a "
        "new tool result can tokenize more densely than the prompt the calibration "
        "came from (on the shared trajectories up to ~3% near the budget).",
    )
    uncalibrated_margin: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="The same margin before any provider usage calibrates the "
        "counts (a fresh history, a provider that reports no usage, or "
        "usage_anchoring=false). tiktoken can count well below the provider "
        "(Gemini: 9% median on first calls, up to 27%), but each point of margin "
        "is a point of window given up until usage arrives.",
    )
    chars_per_token: float = Field(
        3.6,
        gt=0,
        description="Fallback estimate when no tiktoken encoding can be loaded "
        "(calibrated on the shared trajectories); sizes compress_min_share.",
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, type(self).model_fields) from None
        check_tool_keys(self)
        check_consistency(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardPolicy:
        """Build from a dict; accepts an app config's ``agent.contextGuard`` block."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"Config must be a mapping, got {type(data).__name__}.",
                hint="write the settings as key: value pairs.",
            )
        return cls(**policy_block(data))

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> GuardPolicy:
        """Load from a YAML file (pydantic-settings' ``YamlConfigSettingsSource``).

        The settings may sit in an application config's ``agent.contextGuard``
        block, with camelCase names. A missing file, bad YAML or a bad or
        misspelt setting raises ``ConfigError`` naming the file, the line and
        the key. ``overrides`` win over the file; the environment is not read
        (``from_env(yaml_file=...)`` reads both).
        """
        return load_settings(cls, explicit=overrides, yaml_file=path, read_env=False)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        env_file: str | Path | None = None,
        yaml_file: str | Path | None = None,
        **overrides: Any,
    ) -> GuardPolicy:
        """Build from ``CONTEXT_GUARD_<FIELD>`` and ``MAX_CONTEXT_TOKENS`` & co.

        Read through pydantic-settings (names case-insensitive; ``env_file``
        adds a ``.env`` file, ``yaml_file`` a YAML file). Precedence, highest
        first: ``overrides`` > the environment > the ``.env`` file > the YAML
        file > defaults. Values are JSON when they parse as JSON, else text. An
        unknown ``CONTEXT_GUARD_*`` name is warned about once, with the closest
        setting; a bad value names its variable (or file, line and key).
        """
        return load_settings(
            cls,
            explicit=overrides,
            environ=environ,
            env_file=env_file,
            yaml_file=yaml_file,
        )

    def with_archive(self) -> GuardPolicy:
        """This policy as an adapter with a ``ResultArchive`` runs it.

        ``archived_results`` on, and each of ``ARCHIVE_DEFAULTS`` this policy does
        not set itself: with the originals kept, every pruning leaves a way back
        (the digest names trimmed results by key), so the guard can prune deeper.
        The small digest's share and call length are the note's: a policy whose
        digest is the turns (``digest_form="turns"``) keeps its own room for them.
        What this fills in still counts as unset (``chosen_fields``).
        """
        chosen = self.chosen_fields
        filled = {k: v for k, v in ARCHIVE_DEFAULTS.items() if k not in chosen}
        if self.digest_form == "turns":
            for name in NOTE_ONLY:
                filled.pop(name, None)
        settings = {**filled, **{k: getattr(self, k) for k in chosen}}
        archived = type(self).model_validate({**settings, "archived_results": True})
        archived._archive_filled = frozenset(filled)
        return archived

    def updated(self, **settings: Any) -> GuardPolicy:
        """This policy with ``settings`` set as well.

        What ``with_archive`` filled in stays filled in (``chosen_fields``),
        unless ``settings`` sets it.
        """
        chosen = {k: getattr(self, k) for k in self.chosen_fields}
        policy = type(self)(**{**chosen, **settings})
        return policy.with_archive() if self._archive_filled else policy

    @property
    def chosen_fields(self) -> frozenset[str]:
        """The fields the caller set: ``model_fields_set`` less ``with_archive``'s."""
        return frozenset(self.model_fields_set) - self._archive_filled

    def budget(self, window: int) -> int:
        """Tokens the sent messages may use in a window of ``window`` tokens."""
        return window - self.reserve(window)

    def reserve(self, window: int) -> int:
        """Tokens kept free for the reply in a window of ``window`` tokens.

        ``reserve_tokens`` when it is set; otherwise ``default_reserve(window)``:
        one rule for every window, whether the middleware, ``inspect``, ``demo``
        or ``replay`` resolves it.
        """
        if "reserve_tokens" in self.model_fields_set:
            return self.reserve_tokens
        return default_reserve(window, cap=self.reserve_tokens)

    def turn_limit(self, session_kind: str | None) -> int | None:
        """The user-turn limit for a kind of session."""
        if session_kind is not None and session_kind in self.history_limits:
            return self.history_limits[session_kind]
        return self.history_limit
