"""Store namespaces of the archives: one per conversation, for any thread id.

A LangGraph store label may not be empty or hold a ``.`` (``SqliteStore`` and
``PostgresStore`` join the labels with dots), so every label taken from a
thread id or a prefix is encoded by ``encode_label``: readable ids (letters,
digits and ``-_@+:=,``) stay as they are, every other character becomes
``~XX`` per UTF-8 byte (``user.42`` -> ``user~2E42``), the empty id is ``~``
and a label over ``MAX_LABEL`` characters is ``~~`` plus its SHA-256. No two
ids share a label, and no encoded label is a wildcard to any store.

A namespace prefix (a user or tenant, as LangGraph's store docs scope
memories) goes before the archive's own labels; a prefix label written
``{key}`` is filled from ``config["configurable"][key]`` at run time. Without
a thread id, or with a ``{key}`` the config lacks, there is no namespace
(``None``): nothing is archived and nothing is read, never a shared one.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..engine import ConfigError

ROOT = "context_guard"
MAX_LABEL = 200
"""Longest label kept readable; longer ones are hashed (PostgreSQL indexes the
joined namespace, and an index row holds about 2,700 bytes)."""

_SAFE = frozenset(string.ascii_letters + string.digits + "-_@+:=,")
_TEMPLATE = re.compile(r"\{(\w+)\}")


def encode_label(value: str) -> str:
    """``value`` as a store label: never empty, no ``.``, one label per value."""
    if not isinstance(value, str):
        raise ConfigError(
            f"A store label must be a string, got {type(value).__name__}.",
            field="thread_id",
            hint="pass the conversation's thread id (without one there is no archive).",
        )
    if not value:
        return "~"
    raw = value.encode("utf-8", "surrogatepass")  # lone surrogates from JSON too
    out = "".join(
        c
        if c in _SAFE
        else "".join(f"~{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        for c in value
    )
    if len(out) > MAX_LABEL:
        return "~~" + hashlib.sha256(raw).hexdigest()
    return out


def check_prefix(prefix: Sequence[str], *, field: str) -> tuple[str, ...]:
    """``prefix`` as a tuple of labels; raises ``ConfigError`` when it is not one."""
    if isinstance(prefix, str) or not all(isinstance(p, str) for p in prefix):
        raise ConfigError(
            f"{field} must be a tuple of strings, got {prefix!r}.",
            field=field,
            hint='pass a tuple such as ("tenants", "{user_id}") ("{key}" is filled '
            "from config['configurable']).",
        )
    labels = tuple(prefix)
    if labels[:1] == ("langgraph",):
        raise ConfigError(
            f'{field} may not start with "langgraph" (LangGraph reserves it).',
            field=field,
            hint="start it with your own label, e.g. your application's name.",
        )
    return labels


def configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    """``config["configurable"]``, else the running graph's, else empty."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            return {}
    return config.get("configurable") or {}


def thread_of(config: RunnableConfig | None) -> str | None:
    """The thread id in ``config`` (or the running graph's config), if any."""
    value = configurable(config).get("thread_id")
    return None if value is None else str(value)


def resolve_prefix(
    prefix: Sequence[str], values: Mapping[str, Any]
) -> tuple[str, ...] | None:
    """``prefix``, its ``{key}`` labels filled from ``values``; None if one lacks."""
    out: list[str] = []
    for label in prefix:
        match = _TEMPLATE.fullmatch(label)
        if match is None:
            out.append(label)
            continue
        value = values.get(match.group(1))
        if value is None:
            return None
        out.append(str(value))
    return tuple(out)


def missing_keys(prefix: Sequence[str], values: Mapping[str, Any]) -> list[str]:
    """The ``{key}`` labels of ``prefix`` that ``values`` does not fill."""
    keys = [m.group(1) for p in prefix if (m := _TEMPLATE.fullmatch(p))]
    return [k for k in keys if values.get(k) is None]


def scoped(
    prefix: Sequence[str], labels: Sequence[str], thread_id: str
) -> tuple[str, ...]:
    """``(*prefix, *labels)`` around the thread id, every caller label encoded."""
    encoded = tuple(encode_label(p) for p in prefix)
    return (*encoded, ROOT, *labels, encode_label(thread_id))


def why_unscoped(
    thread_id: str | None, prefix: Sequence[str], values: Mapping[str, Any]
) -> str:
    """Why a conversation has no archive namespace ("" when it has one)."""
    if thread_id is None:
        return (
            "no thread_id in the config (archives are kept per conversation; "
            "compile the graph with a checkpointer and pass a thread_id)"
        )
    missing = missing_keys(prefix, values)
    if missing:
        keys = ", ".join(f"config['configurable'][{k!r}]" for k in missing)
        return f"the namespace prefix needs {keys}"
    return ""
