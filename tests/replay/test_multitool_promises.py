"""The guard's promises on real multi-tool transcripts, for every documented policy.

Each model call of a transcript from each agent family of the shared multi-tool
corpus (Claude Code conversations with to-do lists and MCP tools, OpenHands,
SWE-agent 0.x) is prepared in order by one guard, as an agent would call it: for
each tool policy docs/configuration.md documents, at 16k and 32k, and with the
kinds of token counter LangChain users pass (a function of a message list,
LangChain's approximate counter, a chat model). Every prompt is within the
budget in the guard's own count and breaks no tool pair; where an excluded
tool's whole result cannot fit, the error names the tool.
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    ToolPolicy,
)
from langchain_context_guard.engine._messages import holds_reply
from langchain_context_guard.replay import shared_multitool_dir
from tests.engine._support import assert_paired

CORPUS = shared_multitool_dir()
TRANSCRIPTS = [
    "cc-4a35fe98-s0",  # to-do lists called beside other tools, MCP servers
    "cc-abe7033e-s0",  # Read, Edit and Write of the same files
    "oh-django__django-12273",  # str_replace_editor
    "sa0-gpt-4o-mini-2024-07-18-fasterxml__jackson-core-1016",
]
POLICIES = {
    "defaults": {},
    "ranged-read": {
        "tool_policies": {
            "Read": ToolPolicy(supersede_key=("file_path", "offset", "limit"))
        }
    },
    "read-by-path": {"tool_policies": {"Read": ToolPolicy(supersede_key="file_path")}},
    "editor": {
        "tool_policies": {
            "str_replace_editor": ToolPolicy(
                supersede_key=("path", "command", "view_range")
            )
        }
    },
    "todo-keep-1": {"tool_policies": {"TodoWrite": ToolPolicy(keep_recent=1)}},
    "edits-whole-todo-last": {
        "tool_policies": {
            "Edit": ToolPolicy(never_compress=True),
            "Write": ToolPolicy(never_compress=True),
            "TodoWrite": ToolPolicy(drop_last=True),
        }
    },
    "mcp-cap": {"tool_policies": {"mcp__*": ToolPolicy(max_result_chars=1_000)}},
    "call-args": {"compress_call_args": True},
    "digest-turns": {"digest": True, "digest_form": "turns"},
    "interactive": {"interactive_tuning": True},
    "exclude-edits": {"exclude_tools": ("Edit", "str_replace_editor")},
}

pytestmark = pytest.mark.skipif(CORPUS is None, reason="no shared multi-tool data")


@cache
def _history(name: str) -> tuple[BaseMessage, ...]:
    assert CORPUS is not None
    data = json.loads((Path(CORPUS) / f"{name}.json").read_text())
    return tuple(messages_from_dict(data["messages"]))


def _characters(messages: list[BaseMessage]) -> int:
    """A list counter as a user writes one: 4 characters a token, 3 to prime."""
    return sum(len(str(m.content)) // 4 + 4 for m in messages) + 3


def _model() -> FakeMessagesListChatModel:
    """A chat model as the counter: its ``get_num_tokens_from_messages``."""
    return FakeMessagesListChatModel(responses=[], custom_get_token_ids=str.split)


def _run(
    name: str, policy: GuardPolicy, counter: object = None, *, persist: bool = False
) -> tuple[int, int]:
    """Prepare every call of transcript ``name``: (calls, calls refused by name).

    ``persist``: as a persist-mode hook runs it, each call on the prompt the
    guard sent last and the new messages (``prepare(persist=True)``); where a
    person replied, the reply stays with the answer it replies to.
    """
    history = list(_history(name))
    guard = ContextGuard(policy, token_counter=counter)
    state: list[BaseMessage] = []
    calls = refused = seen = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(1, len(history)):
            if not isinstance(history[k], AIMessage):
                continue
            calls += 1
            given = [*state, *history[seen:k]] if persist else history[:k]
            try:
                sent = guard.prepare(given, persist=persist)
            except BudgetExceededError as err:
                # Only an excluded tool's whole result may not fit, and it is named.
                assert err.tool is not None, (name, k, str(err))
                refused += 1
                continue
            report = sent.report
            assert report.tokens_after <= report.budget, (name, k, report)
            assert guard.count_tokens(sent.messages) <= report.budget, (name, k)
            assert_paired(sent.messages)
            if persist:
                state, seen = sent.messages, k
                assert holds_reply(state) or not holds_reply(history[:k]), (name, k)
    return calls, refused


@pytest.mark.parametrize("window", [16_000, 32_000])
@pytest.mark.parametrize("name", TRANSCRIPTS)
@pytest.mark.parametrize("setting", list(POLICIES))
def test_every_documented_policy_keeps_the_budget_and_the_pairs(setting, name, window):
    policy = GuardPolicy(context_window=window, **POLICIES[setting])
    calls, refused = _run(name, policy)
    assert calls > 20
    if "exclude_tools" not in POLICIES[setting]:
        assert refused == 0


@pytest.mark.parametrize(
    "counter",
    [_characters, count_tokens_approximately, _model],
    ids=["callable", "langchain-approximate", "model"],
)
@pytest.mark.parametrize("name", TRANSCRIPTS[:2])
def test_drop_last_keeps_the_budget_with_every_kind_of_counter(counter, name):
    """The to-do tool dropped last, called in parallel with other tools."""
    policy = GuardPolicy(context_window=16_000, **POLICIES["edits-whole-todo-last"])
    made = counter() if counter is _model else counter
    calls, refused = _run(name, policy, made)
    assert calls > 20 and refused == 0


@pytest.mark.parametrize("window", [16_000, 32_000])
@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_persist_mode_keeps_the_budget_and_the_pairs(name, window):
    """The defaults in persist mode, where the output is the stored history."""
    calls, refused = _run(name, GuardPolicy(context_window=window), persist=True)
    assert calls > 20 and refused == 0


@pytest.mark.parametrize("window", [16_000, 32_000])
@pytest.mark.parametrize("name", TRANSCRIPTS[:2])
def test_an_archived_policy_keeps_the_budget_and_the_pairs_after_a_reply(name, window):
    """As an adapter with a ``ResultArchive`` runs the defaults: after a
    person's reply, the interactive settings with the markers naming keys."""
    policy = GuardPolicy(context_window=window).with_archive()
    assert ContextGuard(policy).policy_for(None, replied=True).digest_form == "turns"
    for persist in (False, True):
        calls, refused = _run(name, policy, persist=persist)
        assert calls > 20 and refused == 0
