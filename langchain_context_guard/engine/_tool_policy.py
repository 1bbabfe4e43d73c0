"""``ToolPolicy``: how one tool's results are truncated and compressed.

``GuardPolicy.tool_policies`` maps a tool name to one; ``exclude_tools`` names
tools whose results are never truncated or compressed (LangChain's
``ClearToolUsesEdit`` word). A key holding ``*``, ``?`` or ``[`` is a
shell-style pattern of names instead (``fnmatchcase``: ``"mcp__github__*"``,
``"read_*"``), in both. A tool follows its exact key's policy, else that of the
first pattern matching it in the mapping's order (``policy_for``); policies are
not merged, and a pattern's applies to each tool it matches as if written for
it by name. A result is matched by its ``ToolMessage.name``, which LangChain's
tool nodes and ``tool.invoke(tool_call)`` set; a result with no name follows
the policy's general settings (a superseded read is matched by its tool call's
name, which holds the key argument). The passes read these through
``result_caps``, ``whole_tools``, ``tool_keeps``, ``supersede_keys`` and
``last_tools``: views that resolve each name once through ``policy_for``, so
each rule is written once and no pass matches names itself. A pattern, not a
callable: the rules must be equal for equal policies and written in YAML.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, Protocol, TypeVar, cast

from langchain_core.messages import BaseMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import ConfigError
from ._policy_checks import config_error


class ToolPolicy(BaseModel):
    """Limits for one tool's results (unset: the ``GuardPolicy``'s own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_result_chars: int | None = Field(
        None,
        ge=400,
        description="Its results longer than this are cut to head + tail, instead "
        "of at max_tool_result_chars (the cut to a share of the budget still "
        "applies). At least 400: room for the marker, a head and a tail.",
    )
    never_compress: bool = Field(
        False,
        description="Its results are never compressed, however old (the "
        "assistant message that made the call may be).",
    )
    keep_recent: int | None = Field(
        None,
        ge=0,
        description="How many of its newest results stay whole, counted among "
        "its own results (older ones are compressed in batches of "
        "compress_batch of its own). Unset: keep_recent_tool_results, counted "
        "over all results.",
    )
    supersede_key: str | tuple[str, ...] | None = Field(
        None,
        description="The argument naming what a call reads (e.g. 'path' for "
        "read_file; 'command' for a shell: the same command run again), or "
        "several, the first required (('file_path', 'offset', 'limit'): the same "
        "range of the same file). Once a later call of this tool has the same "
        "values, the older result is replaced by a pointer to the newer call, "
        "when results are compressed, and no longer counts among the newest kept "
        "whole; a failed call (status='error') never supersedes. Unset: never "
        "(nor with never_compress or exclude_tools).",
    )
    write_key: str | None = Field(
        None,
        description="The argument naming what a call of this tool writes (e.g. "
        "'file_path' for Claude Code's Write). Once such a call succeeds, the "
        "older results of reads of the same thing (a tool whose supersede_key's "
        "first argument has that value, any range) are outdated and become a "
        "pointer to the write, as a newer read makes them, when results are "
        "compressed. For a tool whose call shows the new text whole (Write's "
        "content); an edit that shows only a snippet leaves the rest of an older "
        "read current, so it is not one. Unset: never.",
    )
    drop_last: bool = Field(
        False,
        description="Its calls and their results are dropped last: when the "
        "trim must drop history, every other droppable message goes first "
        "(history_limit too leaves them), and these only when what is left "
        "still does not fit, oldest first like the rest.",
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, type(self).model_fields, "ToolPolicy") from None
        keys = key_names(self.supersede_key)
        if self.supersede_key is not None and (
            not keys or not all(map(str.strip, keys))
        ):
            raise ConfigError(
                f"ToolPolicy.supersede_key: got {self.supersede_key!r}.",
                field="supersede_key",
                hint="name the argument a call reads ('path'), or several "
                "(['file_path', 'offset', 'limit']), none blank.",
            )
        if self.write_key is not None and not self.write_key.strip():
            raise ConfigError(
                f"ToolPolicy.write_key: got {self.write_key!r}.",
                field="write_key",
                hint="name the argument a call writes ('file_path'), or leave it "
                "unset.",
            )
        if self.write_key is not None and self.supersede_key is not None:
            raise ConfigError(
                "ToolPolicy: supersede_key and write_key are both set; a tool's "
                "calls either read a thing or write it.",
                field="write_key",
                hint="set supersede_key on the reading tool (Read) and write_key on "
                "the writing one (Write).",
            )


class _HasToolRules(Protocol):
    @property
    def tool_policies(self) -> Mapping[str, ToolPolicy]: ...
    @property
    def exclude_tools(self) -> tuple[str, ...]: ...


_PATTERN_CHARS = frozenset("*?[")
_ABSENT: Any = object()  # no rule gives the tool a value
_UNSEEN: Any = object()
_SEEN_CAP = 4_096  # names a view remembers before it starts over

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Written:
    """A writing tool's rule in ``supersede_keys``: the argument it writes."""

    key: str


def key_names(key: str | tuple[str, ...] | Written | None) -> tuple[str, ...]:
    """A ``supersede_key`` as the argument names it reads (none when unset)."""
    if key is None or isinstance(key, Written):
        return ()
    return (key,) if isinstance(key, str) else tuple(key)


def is_pattern(key: str) -> bool:
    """Whether a ``tool_policies`` / ``exclude_tools`` key is a pattern of names."""
    return not _PATTERN_CHARS.isdisjoint(key)


class ByName(Mapping[str, V]):
    """Per tool name, one rule's value where a rule gives it; any name may be asked.

    ``value(name)`` says it (``_ABSENT``: none), once per name: the passes ask on
    every message. Iterating yields the rules' keys as written (patterns too); it
    is empty, and the view false, when no rule gives this value.
    """

    __slots__ = ("_keys", "_seen", "_value")

    def __init__(self, keys: tuple[str, ...], value: Callable[[str], Any]) -> None:
        self._keys = keys
        self._value = value
        self._seen: dict[str, Any] = {}

    def _find(self, name: str) -> Any:
        found = self._seen.get(name, _UNSEEN)
        if found is _UNSEEN:
            if len(self._seen) >= _SEEN_CAP:
                self._seen.clear()
            found = self._seen[name] = self._value(name)
        return found

    def __getitem__(self, name: str) -> V:
        found = self._find(name)
        if found is _ABSENT:
            raise KeyError(name)
        return cast("V", found)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not _ABSENT

    def get(self, name: str, default: Any = None) -> Any:
        """Its value for ``name``, else ``default``."""
        found = self._find(name)
        return default if found is _ABSENT else found

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class ToolRules:
    """One policy's tool rules: ``policy_for`` and the views the passes read."""

    def __init__(
        self, policies: tuple[tuple[str, ToolPolicy], ...], exclude: tuple[str, ...]
    ) -> None:
        self._exact = {key: rule for key, rule in policies if not is_pattern(key)}
        self._patterns = [(key, rule) for key, rule in policies if is_pattern(key)]
        self._excluded = frozenset(key for key in exclude if not is_pattern(key))
        self._exclusions = [key for key in exclude if is_pattern(key)]

        def keys(field: str, default: object) -> tuple[str, ...]:
            return tuple(k for k, r in policies if getattr(r, field) != default)

        self.caps: ByName[int | None] = ByName(
            keys("max_result_chars", None) + exclude, self._cap
        )
        self.whole: ByName[bool] = ByName(
            keys("never_compress", False) + exclude, self._whole
        )
        self.keeps: ByName[int] = ByName(
            keys("keep_recent", None), lambda n: self._field(n, "keep_recent")
        )
        self.supersede: ByName[str | tuple[str, ...] | Written] = ByName(
            keys("supersede_key", None) + keys("write_key", None), self._supersede
        )
        self.last: ByName[bool] = ByName(keys("drop_last", False), self._last)

    def policy_for(self, name: str) -> ToolPolicy | None:
        """The exact key's policy, else the first matching pattern's, in order."""
        exact = self._exact.get(name)
        if exact is not None:
            return exact
        return next((r for key, r in self._patterns if fnmatchcase(name, key)), None)

    def excluded(self, name: str) -> bool:
        """Whether ``exclude_tools`` names the tool, or has a pattern matching it."""
        return name in self._excluded or any(
            fnmatchcase(name, key) for key in self._exclusions
        )

    def _field(self, name: str, field: str) -> Any:
        rule = self.policy_for(name)
        value = None if rule is None else getattr(rule, field)
        return _ABSENT if value is None else value

    def _supersede(self, name: str) -> Any:
        rule = self.policy_for(name)
        if rule is not None and rule.write_key is not None:
            return Written(rule.write_key)
        return self._field(name, "supersede_key")

    def _cap(self, name: str) -> Any:
        return None if self.excluded(name) else self._field(name, "max_result_chars")

    def _whole(self, name: str) -> Any:
        rule = self.policy_for(name)
        kept = self.excluded(name) or (rule is not None and rule.never_compress)
        return True if kept else _ABSENT

    def _last(self, name: str) -> Any:
        rule = self.policy_for(name)
        return True if rule is not None and rule.drop_last else _ABSENT


def tool_rules(policy: _HasToolRules) -> ToolRules:
    """A policy's ``ToolRules``, built once per distinct set of rules."""
    return _rules(tuple(policy.tool_policies.items()), policy.exclude_tools)


@lru_cache(maxsize=64)
def _rules(
    policies: tuple[tuple[str, ToolPolicy], ...], exclude: tuple[str, ...]
) -> ToolRules:
    return ToolRules(policies, exclude)


def policy_for(policy: _HasToolRules, name: str) -> ToolPolicy | None:
    """The ``ToolPolicy`` a tool follows: its exact key's, else the first pattern's."""
    return tool_rules(policy).policy_for(name)


def result_caps(policy: _HasToolRules) -> Mapping[str, int | None]:
    """Per tool name, its results' character cap; None: never truncated."""
    return tool_rules(policy).caps


def whole_tools(policy: _HasToolRules) -> Collection[str]:
    """Names of the tools whose results are never compressed."""
    return tool_rules(policy).whole


def tool_keeps(policy: _HasToolRules) -> Mapping[str, int]:
    """Per tool name, how many of its own newest results stay whole (if set)."""
    return tool_rules(policy).keeps


def supersede_keys(
    policy: _HasToolRules,
) -> Mapping[str, str | tuple[str, ...] | Written]:
    """Per tool name, the argument(s) whose repeat supersedes an older result.

    A writing tool (``ToolPolicy.write_key``) has its argument as ``Written``.
    """
    return tool_rules(policy).supersede


def last_tools(policy: _HasToolRules) -> Collection[str]:
    """Names of the tools whose calls the trim drops last."""
    return tool_rules(policy).last


def check_tool_keys(policy: _HasToolRules) -> None:
    """Refuse an empty or blank ``tool_policies`` / ``exclude_tools`` key."""
    for field, keys in (
        ("tool_policies", tuple(policy.tool_policies)),
        ("exclude_tools", policy.exclude_tools),
    ):
        for key in keys:
            if not key.strip():
                raise ConfigError(
                    f"GuardPolicy.{field} has a blank key ({key!r}): a key is a "
                    "tool's name or a pattern of names.",
                    field=field,
                    hint="write the tool's name (its ToolMessage.name), or a "
                    'pattern such as "mcp__github__*" or "read_*"; remove the '
                    "entry to leave the general settings in charge.",
                )


def tool_name(message: BaseMessage) -> str | None:
    """The tool a result came from, by its ``name``; None for other messages."""
    return message.name if isinstance(message, ToolMessage) else None
