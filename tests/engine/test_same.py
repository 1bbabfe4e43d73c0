"""``_extends``: recognising the history seen before, grown or rebuilt."""

from __future__ import annotations

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    messages_from_dict,
    messages_to_dict,
)

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import same_message
from langchain_context_guard.engine.incremental._extends import (
    RECHECKED,
    equal_values,
    extends_kept,
    extends_unchanged,
    recent_contents,
    recent_fields,
)
from tests.engine._support import agent_history, ai, call, snapshot


def _rebuilt(history: list[BaseMessage]) -> list[BaseMessage]:
    """Equal, not identical, messages: a checkpoint round trip."""
    return messages_from_dict(messages_to_dict(history))


def test_a_checkpoint_copy_is_equal_and_gives_its_own_recent_contents():
    history = agent_history(30)
    copy = _rebuilt(history)
    contents = equal_values(copy, history)
    assert contents is not None
    assert all(a is b for a, b in zip(contents, recent_contents(copy), strict=True))


def test_only_the_last_rechecked_contents_are_kept():
    history = agent_history(RECHECKED // 2 + 10, result_chars=10)
    contents = equal_values(_rebuilt(history), history)
    assert contents is not None and len(contents) == RECHECKED


def test_any_difference_is_not_equal_and_equal_always_means_same_messages():
    history = agent_history(12)
    edits = [
        lambda m: m.model_copy(update={"content": f"{m.content} edited"}),
        lambda m: m.model_copy(update={"id": "other"}),
        lambda m: m.model_copy(update={"name": "renamed"}),
        lambda m: AIMessage(content=m.content, id=m.id),  # another type
        lambda m: m.model_copy(update={"additional_kwargs": {"x": 1}}),
    ]
    for at in (0, 5, len(history) - 1):
        for edit in edits:
            changed = _rebuilt(history)
            changed[at] = edit(changed[at])
            found = equal_values(changed, history)
            same = all(map(same_message, changed, history))
            assert found is None or same
            assert found is None
    assert equal_values(history[:-1], history) is None  # shorter


def test_an_extra_of_none_is_left_to_the_per_message_check():
    history = [ai(call("c1"), content="go", id="a1")]
    copy = _rebuilt(history)
    object.__setattr__(copy[0], "__pydantic_extra__", None)
    assert equal_values(copy, history) is None
    assert same_message(copy[0], history[0])  # the guard still takes it as equal


def test_a_guard_given_rebuilt_histories_sends_what_it_sends_for_the_same_objects():
    # (its report adds a ``reuse`` event: the prompt is not the history's objects)
    policy = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
    same, rebuilt = ContextGuard(policy), ContextGuard(policy)
    full = agent_history(60, result_chars=3_000)
    for k in range(4, len(full) + 1, 2):
        a = same.prepare(full[:k])
        b = rebuilt.prepare(_rebuilt(full[:k]))
        assert snapshot(b.messages) == snapshot(a.messages)
        assert b.report.tokens_after == a.report.tokens_after


def test_an_edit_in_place_is_seen_and_an_equal_content_is_no_edit():
    history = agent_history(40)
    kept = list(history)
    fields, contents = recent_fields(kept), recent_contents(kept)
    grown = [*history, ai(content="next")]
    assert extends_kept(grown, kept, fields, contents)
    assert extends_unchanged(grown, kept, contents)
    # The very object, its content replaced by an equal string: counts the same.
    history[-3].content = "".join(list(str(history[-3].content)))
    assert history[-3].content is not contents[-3]
    assert extends_kept(grown, kept, fields, contents)
    assert extends_unchanged(grown, kept, contents)
    history[-3].content = f"{history[-3].content} edited"
    assert not extends_kept(grown, kept, fields, contents)
    assert not extends_unchanged(grown, kept, contents)
