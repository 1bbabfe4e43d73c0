"""Signed reasoning is sent only behind the very prefix that produced it."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import final_tool_turn
from langchain_context_guard.engine.passes._bound_thinking import (
    drop_stale_thinking,
    is_signed,
)
from langchain_context_guard.engine.passes._hygiene import (
    enforce_provider_hygiene,
    opens_with_user,
)
from langchain_context_guard.engine.passes._provider_compaction import (
    drop_before_compaction,
)
from langchain_context_guard.engine.passes._repair import repair_tool_pairs
from langchain_context_guard.engine.passes._sanitize import sanitize_messages
from tests.engine._support import agent_history, call, result, snapshot, transcripts
from tests.engine.test_reference import COUNTER, POLICIES, SETTINGS, assert_reference


def _signed_at(messages: list[BaseMessage]) -> list[tuple[int, object]]:
    return [
        (i, b)
        for i, m in enumerate(messages)
        if isinstance(m, AIMessage) and isinstance(m.content, list)
        for b in m.content
        if is_signed(b)
    ]


def _prefix_of(messages: list[BaseMessage], block: object) -> list[BaseMessage]:
    """The messages before the one holding ``block`` (compared by identity)."""
    for i, m in enumerate(messages):
        if isinstance(m.content, list) and any(b is block for b in m.content):
            return messages[:i]
    raise AssertionError("not in the history")


def test_only_the_blocks_after_an_edit_go():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    redacted = {"type": "redacted_thinking", "data": "ZZ"}
    history: list[BaseMessage] = [
        HumanMessage("task", id="u"),
        AIMessage([thinking, {"type": "text", "text": "one"}], id="a"),
        HumanMessage("more", id="v"),
        AIMessage([redacted, {"type": "text", "text": "two"}], id="b"),
    ]
    assert drop_stale_thinking(history, history) is history
    edited = [*history[:2], HumanMessage("more, shorter", id="v"), history[3]]
    out = drop_stale_thinking(edited, history)
    assert out[1] is history[1]  # before the edit: kept
    assert out[3].content == [{"type": "text", "text": "two"}]
    assert history[3].content[0] == redacted  # the caller's message is not mutated


def test_a_message_edited_after_its_block_keeps_it():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    was = AIMessage([thinking, {"type": "text", "text": "long " * 50}], id="a")
    now = was.model_copy(update={"content": [thinking, {"type": "text", "text": "x"}]})
    task = HumanMessage("q")
    out = drop_stale_thinking([task, now], [task, was])
    assert out[1].content[0] == thinking


def _sent(guard: ContextGuard, history: list[BaseMessage]) -> list[BaseMessage] | None:
    try:
        return guard.prepare(history).messages
    except BudgetExceededError:
        return None


def _signature(prompt: list[BaseMessage]) -> str:
    return hashlib.sha256(snapshot(prompt).encode()).hexdigest()


def as_read(prompt: list[BaseMessage], stale: bool) -> list[BaseMessage]:
    """``prompt`` as the model read it: a ``stale`` final turn's leading block
    dropped by the API (``drop_block``) before the model saw it.

    Our reading: a reply is bound to what its model saw.
    """
    if not stale:
        return prompt
    final = final_tool_turn(prompt)
    message = prompt[final]
    kept = [b for b in message.content if not is_signed(b)]
    return [
        *prompt[:final],
        message.model_copy(update={"content": kept}),
        *prompt[final + 1 :],
    ]


def _stale_final(prompt: list[BaseMessage]) -> bool:
    final = final_tool_turn(prompt)
    if final == len(prompt):
        return False
    return any(
        is_signed(b) and b["signature"] != _signature(prompt[:final])
        for b in prompt[final].content
    )


def _signed_turn(k: int, prompt: list[BaseMessage]) -> list[BaseMessage]:
    """Step ``k``'s reply, its block signed with ``prompt`` as the model read it,
    and the call's result."""
    thinking = {"type": "thinking", "thinking": f"step {k}"}
    thinking["signature"] = _signature(as_read(prompt, _stale_final(prompt)))
    reply = AIMessage(
        [thinking, {"type": "text", "text": f"running {k}"}],
        tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")],
        id=f"a{k}",
    )
    return [reply, result(f"c{k}", "line\n" * 300, id=f"t{k}")]


def _given_prefixes(lived: list[BaseMessage]) -> dict[int, str]:
    """Each signed block's prefix in the history as given, sent unedited."""
    read = repair_tool_pairs(drop_before_compaction(sanitize_messages(lived)))
    whole = enforce_provider_hygiene(read, removed=opens_with_user(read))
    return {id(b): snapshot(_prefix_of(whole, b)) for _, b in _signed_at(whole)}


def _next_turn(lived: list[BaseMessage]) -> list[BaseMessage]:
    """``lived`` ending where the model speaks next: results in, or a user turn."""
    last = lived[-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return [*lived, *(result(c["id"] or "", "done") for c in last.tool_calls)]
    if isinstance(last, AIMessage) or len(lived) < 2:  # two: the conversation's key
        return [*lived, HumanMessage("go on")]
    return lived


@SETTINGS
@given(transcripts(usage=True, native=True), POLICIES, st.data())
def test_every_kept_signed_block_has_the_prefix_that_produced_it(history, policy, data):
    """A generated history, then replies produced behind each prompt sent.

    The given history's blocks were produced behind it as it reads; each later
    reply is signed with the prompt the guard sent for it.
    """
    lived = _next_turn(history[: data.draw(st.integers(1, len(history)))])
    given = _given_prefixes(lived)
    policy = policy.model_copy(update={"bound_thinking": True})
    guard = ContextGuard(policy, token_counter=COUNTER)
    for k in range(data.draw(st.integers(1, 5))):
        assert_reference(guard, lived)
        sent = _sent(guard, lived)
        if sent is None:
            return
        final = final_tool_turn(sent)
        stale = False
        for i, block in _signed_at(sent):
            if str(block.get("signature", "")).startswith("p:"):
                valid = block["signature"] == "p:" + _signature(sent[:i])
            else:
                valid = snapshot(sent[:i]) == given[id(block)]
            # A given block's prefix is known only before the first call: what
            # the provider then did with it (read it, or dropped a stale final
            # turn's) shows in the later replies, signed with the prompt as read.
            mine = str(block.get("signature", "")).startswith("p:")
            assert valid or i == final or not (mine or k == 0)
            stale = stale or (not valid and i == final)
        thinking = {"type": "thinking", "thinking": f"step {k}"}
        thinking["signature"] = "p:" + _signature(as_read(sent, stale))
        reply = AIMessage(
            [thinking, {"type": "text", "text": f"running {k}"}],
            tool_calls=[call(f"z{k}", cmd=f"cat f{k}.py")],
            id=f"z{k}",
        )
        lived = [*lived, reply, result(f"z{k}", "line\n" * 200, id=f"zt{k}")]


def _check_bound(prompt: list[BaseMessage]) -> bool:
    """Blocks before a running tool loop's final turn match their prefix; that
    turn starts with its block (Anthropic's rule for every model). Returns
    whether that block is stale (the provider drops it with drop_block).
    """
    final = final_tool_turn(prompt)
    for i, block in _signed_at(prompt):
        if i < final:
            assert block["signature"] == _signature(prompt[:i])
    first = prompt[final].content[0]
    assert is_signed(first)
    return bool(first["signature"] != _signature(prompt[:final]))


@pytest.mark.parametrize("stable", [True, False])
def test_an_agent_whose_model_binds_thinking_never_gets_a_stale_block(stable):
    """The model signs each reply with its prompt; every block before the running
    tool loop's final turn matches it, and that turn always keeps its block."""
    policy = GuardPolicy(
        context_window=16_000, stable_prefix=stable, bound_thinking=True
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    history: list[BaseMessage] = agent_history(0)
    kept = dropped = stale = 0
    for k in range(45):
        prompt = guard.prepare(history).messages
        if k:
            stale += _check_bound(prompt)
        kept += len(_signed_at(prompt))
        dropped += sum(
            isinstance(m, AIMessage) and not any(map(is_signed, m.content))
            for m in prompt
        )
        history = [*history, *_signed_turn(k, prompt)]
    assert kept and dropped  # some blocks went with the edits, some stayed
    assert 0 < stale < 45 // 2  # stale only where a pruning changed the loop's prefix


def test_a_warm_call_grows_the_steps_after_the_bound_thinking_check():
    guard = ContextGuard(
        GuardPolicy(stable_prefix=False, bound_thinking=True), token_counter=COUNTER
    )
    history = agent_history(20, result_chars=200)
    guard.prepare(history[:30])
    guard.prepare(history)
    assert guard._record is not None
    steps = {s.kind: s for s in guard._record.steps}
    assert steps["bound_thinking"].grown and steps["hygiene"].grown


def _agent(policy: GuardPolicy, steps: int) -> list[list[BaseMessage]]:
    """The prompts sent to a model that signs each reply with its prompt."""
    guard = ContextGuard(policy, token_counter=COUNTER)
    history: list[BaseMessage] = agent_history(0)
    prompts = []
    for k in range(steps):
        prompt = guard.prepare(history).messages
        prompts.append(prompt)
        history = [*history, *_signed_turn(k, prompt)]
    return prompts


def test_a_reply_behind_a_pruned_prompt_keeps_its_block_while_that_prompt_holds():
    """Bound to the prompt sent (pruned), not to the history as read."""
    policy = GuardPolicy(
        context_window=16_000, stable_prefix=False, bound_thinking=True
    )
    prompts = _agent(policy, 45)
    fresh = 0
    for prompt in prompts[1:]:
        fresh += not _check_bound(prompt)
    assert fresh >= 30  # the reply behind the last prompt, valid most of the time


def test_pruning_on_every_call_leaves_old_signed_reasoning_where_it_is():
    """Stripping it would make every newer block stale, the newest included."""
    thinking = [
        {"type": "thinking", "thinking": f"t{k}", "signature": f"s{k}"}
        for k in range(3)
    ]
    history: list[BaseMessage] = [HumanMessage("task", id="u")]
    for k, block in enumerate(thinking):
        history += [
            AIMessage([block, {"type": "text", "text": "go"}], id=f"a{k}"),
            HumanMessage(f"more {k}", id=f"u{k}"),
        ]
    fresh = GuardPolicy(stable_prefix=False, bound_thinking=True)
    bound = ContextGuard(fresh, token_counter=COUNTER)
    assert bound.prepare(history).messages == history  # every block kept
    for policy in (
        fresh.model_copy(update={"bound_thinking": False}),
        GuardPolicy(bound_thinking=True),  # stripped where a pruning afresh cuts
        GuardPolicy(stable_prefix=False),  # a model that does not bind
    ):
        sent = ContextGuard(policy, token_counter=COUNTER).prepare(history).messages
        blocks = [len(m.content) for m in sent if isinstance(m, AIMessage)]
        assert blocks == ([1, 1, 2] if not policy.bound_thinking else [1, 1, 1])


@pytest.mark.parametrize("stable", [True, False])
def test_a_reply_joined_to_the_assistant_turn_before_it_loses_its_block(stable):
    """A reply produced behind a prompt that ended with an assistant turn is
    joined to that turn on the next call, its reasoning moved in front of the
    turn's text: a prefix other than its own. A reply that calls tools keeps
    it first (it may be a running loop's final turn, which must start with its
    block: a stale one is the provider's to drop); a reply without calls loses
    it."""
    policy = GuardPolicy(
        context_window=16_000, stable_prefix=stable, bound_thinking=True
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    history: list[BaseMessage] = [
        HumanMessage("task", id="u"),
        AIMessage("Let me think.", id="a"),
    ]
    sent = guard.prepare(history).messages
    thinking = {"type": "thinking", "thinking": "hm", "signature": _signature(sent)}
    reply = AIMessage(
        [thinking, {"type": "text", "text": "reading"}],
        tool_calls=[call("c1", cmd="cat f.py")],
        id="z",
    )
    history = [*history, reply, result("c1", "ok", id="t")]
    sent = guard.prepare(history).messages
    assert [m.id for m in sent] == ["u", "z", "t"]
    assert sent[1].content == [
        thinking,
        {"type": "text", "text": "Let me think."},
        {"type": "text", "text": "reading"},
    ]
    answer = AIMessage([thinking, {"type": "text", "text": "done"}], id="d")
    sent = guard.prepare([*history[:2], answer]).messages
    assert _signed_at(sent) == []
    assert sent[1].content == [
        {"type": "text", "text": "Let me think."},
        {"type": "text", "text": "done"},
    ]


def test_a_join_that_moves_a_block_makes_every_later_block_stale():
    # Two assistant messages in a row are joined into one turn (hygiene); the
    # second's block would move in front of the first's text, so it goes, and
    # the blocks after it were produced behind a turn that is no longer sent.
    def thinking(text: str) -> dict[str, str]:
        return {"type": "thinking", "thinking": text, "signature": "s-" + text}

    history: list[BaseMessage] = [
        HumanMessage("task", id="u"),
        AIMessage("I will look.", id="a"),
        AIMessage([thinking("one"), {"type": "text", "text": "looked"}], id="b"),
        HumanMessage("and then?", id="v"),
        AIMessage([thinking("two"), {"type": "text", "text": "then"}], id="c"),
        HumanMessage("go on", id="w"),
    ]
    for stable in (True, False):
        policy = GuardPolicy(stable_prefix=stable, bound_thinking=True)
        guard = ContextGuard(policy, token_counter=COUNTER)
        assert_reference(guard, history)
        sent = guard.prepare(history).messages
        assert _signed_at(sent) == []
        assert [m.id for m in sent] == ["u", "b", "v", "c", "w"]
    unbound = ContextGuard(GuardPolicy(bound_thinking=False), token_counter=COUNTER)
    assert len(_signed_at(unbound.prepare(history).messages)) == 1  # "two" stays
