import itertools
from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
    enforce_provider_hygiene,
    repair_tool_pairs,
    sanitize_messages,
    trim_to_budget,
)
from langchain_context_guard.engine._messages import is_user
from langchain_context_guard.engine.tokens._counters import REPLY_OVERHEAD
from tests.engine._support import (
    agent_history,
    ai,
    assert_paired,
    call,
    chat_history,
    result,
    snapshot,
    transcripts,
)
from tests.engine.test_reference import SETTINGS

COUNTER = TiktokenCounter()


def _total(messages):
    return sum(COUNTER.count_message(m) for m in messages) + REPLY_OVERHEAD


def _trim(messages, budget, **kwargs):
    return trim_to_budget(
        messages, budget=budget, token_counter=COUNTER.count_message, **kwargs
    )


def test_system_and_one_user_message_are_not_trimmed():
    history = [SystemMessage("sys"), HumanMessage("hello")]
    assert _trim(history, 100) is history


def test_history_within_budget_is_returned_as_is():
    history = chat_history(3)
    assert _trim(history, _total(history)) is history


def test_drops_whole_turns_oldest_first_and_keeps_system_first_and_latest_user():
    history = chat_history(10)
    budget = _total(history) // 2
    before = snapshot(history)
    out = _trim(history, budget)
    assert snapshot(history) == before
    assert _total(out) <= budget
    ids = [m.id for m in out]
    assert ids[:2] == ["sys", "u0"]  # system + first user (the task)
    assert "u9" in ids
    dropped_turns = {m.id[1:] for m in history if m.id not in ids}
    kept_turns = {m.id[1:] for m in out if m.id not in {"sys"}}
    # whole turns: a dropped turn leaves no message behind (turn 0's user stays)
    assert not (dropped_turns - {"0"}) & (kept_turns - {"0"})
    assert max(int(t) for t in dropped_turns) < min(int(t) for t in kept_turns - {"0"})
    assert_paired(out)


def test_keep_first_user_false_may_drop_the_task():
    history = chat_history(10)
    out = _trim(history, _total(history) // 2, keep_first_user=False)
    assert "u0" not in [m.id for m in out]
    assert out[-1] is history[-1]


def test_single_long_agent_turn_drops_call_and_result_groups_together():
    history = agent_history(30)
    out = _trim(history, _total(history) // 3)
    assert [m.id for m in out[:2]] == ["sys", "task"]
    assert out[-2:] == history[-2:]
    assert_paired(out)
    assert _total(out) <= _total(history) // 3


def test_parallel_calls_are_never_split_from_their_results():
    history = [SystemMessage("s"), HumanMessage("task")]
    for k in range(10):
        ids = [f"p{k}a", f"p{k}b", f"p{k}c"]
        history.append(ai(*(call(i) for i in ids), id=f"a{k}"))
        history.extend(result(i, "out " * 200, id=f"t{i}") for i in ids)
    for budget in range(600, _total(history), 400):
        out = _trim(history, budget)
        assert_paired(out)


def test_one_message_alone_over_budget_raises_with_the_figures():
    history = [SystemMessage("s"), HumanMessage("word " * 5_000)]
    with pytest.raises(BudgetExceededError) as info:
        _trim(history, 1_000, window=2_000)
    err = info.value
    assert err.budget == 1_000 and err.window == 2_000
    assert err.tokens > 5_000 and err.over_by == err.tokens - 1_000
    assert "budget is 1,000" in str(err) and "over by" in str(err)
    assert "Fix:" in str(err)


def test_oversized_latest_tool_result_is_truncated_when_dropping_is_not_enough():
    history = [
        SystemMessage("s"),
        HumanMessage("task"),
        ai(call("c1")),
        result("c1", "data " * 8_000),
    ]
    out = _trim(history, 3_000)
    assert _total(out) <= 3_000
    assert isinstance(out[-1], ToolMessage)
    assert "characters truncated" in out[-1].content


@pytest.mark.parametrize("archived", [False, True])
def test_a_last_resort_cut_names_its_result_when_results_are_archived(archived):
    history = [
        SystemMessage("s"),
        HumanMessage("task"),
        ai(call("c1")),
        result("c1", "data " * 8_000),
    ]
    policy = GuardPolicy(archived_results=archived)
    out = _trim(history, 3_000, policy=policy)
    assert _total(out) <= 3_000 and "characters truncated" in out[-1].content
    assert ('full text: read_tool_result("#1")' in out[-1].content) is archived
    assert "c1" not in out[-1].content  # its key (the first result), not its id


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_turn_limit_keeps_last_n_user_turns(limit):
    history = chat_history(8)
    out = _trim(history, 10**9, turn_limit=limit)
    users = [m.id for m in out if isinstance(m, HumanMessage)]
    expected = ["u0"] + [f"u{t}" for t in range(8 - limit, 8)]
    assert users == sorted(set(expected), key=expected.index)
    assert_paired(out)


def test_history_limits_per_session_kind():
    policy = GuardPolicy(history_limit=5, history_limits={"dm": 1, "group": 3})
    guard = ContextGuard(policy)
    history = chat_history(8, words=5)

    def users(kind):
        out = guard.prepare(history, session_kind=kind).messages
        return sum(is_user(m) for m in out)

    assert users("dm") == 2  # first (task) + last
    assert users("group") == 4
    assert users("channel") == 6
    assert users(None) == 6


def test_step_quantisation_keeps_the_cut_point_stable_as_history_grows():
    full = agent_history(120, result_chars=1_000)
    budget = 12_000
    cuts = []
    for n in range(40, 121):
        out = _trim(full[: 2 + 2 * n], budget, step=0.15)
        assert _total(out) <= budget
        cuts.append(out[2].id)  # first message after system + task
    moves = sum(a != b for a, b in itertools.pairwise(cuts))
    exact = []
    for n in range(40, 121):
        out = _trim(full[: 2 + 2 * n], budget, step=0.0)
        exact.append(out[2].id)
    exact_moves = sum(a != b for a, b in itertools.pairwise(exact))
    assert exact_moves >= 60  # without steps the cut moves on nearly every call
    assert moves <= exact_moves // 5


def test_stable_cut_gives_byte_identical_prefix_between_moves():
    full = agent_history(60, result_chars=1_000)
    prev = None
    same = 0
    for n in range(30, 61):
        out = _trim(full[: 2 + 2 * n], 8_000)
        if prev is not None and out[2] is prev[2]:
            assert snapshot(out[: len(prev)]) == snapshot(prev)
            same += 1
        prev = out
    assert same >= 20


def test_summaries_are_protected():
    summary = HumanMessage(
        "summary", additional_kwargs={"context_guard": {"kind": "summary"}}
    )
    history = [SystemMessage("s"), summary, *chat_history(10)[1:]]
    out = _trim(history, _total(history) // 3)
    assert out[1] is summary


def test_measure_callable_decides_what_fits():
    history = chat_history(6)
    out = trim_to_budget(
        history,
        budget=1_000,
        token_counter=lambda m: 1,
        measure=lambda msgs: 100 * len(msgs),
    )
    assert 100 * len(out) <= 1_000
    assert_paired(out)


def test_tuple_input_is_accepted_and_an_ai_message_is_kept_whole():
    history = tuple(chat_history(4))
    out = _trim(history, _total(history) // 2)
    assert isinstance(out, list)
    assert all(
        isinstance(m, AIMessage | HumanMessage | SystemMessage | ToolMessage)
        for m in out
    )


PREPARED_AGAIN = {
    "result-smaller-than-its-stand-in": [
        SystemMessage("s" * 18, id="m0"),
        ToolMessage("alpha", tool_call_id="c0", id="r0"),
        AIMessage("alpha", id="m2"),
        HumanMessage("alpha", id="m3"),
        HumanMessage("alpha", id="m4"),
        HumanMessage("alpha beta", id="m5"),
        AIMessage("alpha " * 6, tool_calls=[call("c0")], id="m6"),
        ToolMessage("alpha", tool_call_id="c0", id="r7"),
    ],
    "placeholder-is-no-turn": [
        SystemMessage("You are an agent. " * 25, id="m0"),
        AIMessage("alpha", id="m1"),
        HumanMessage("alpha", id="m2"),
        AIMessage("", tool_calls=[call("c0")], id="m3"),
        ToolMessage("alpha", tool_call_id="c0", id="r4"),
        HumanMessage("alpha", id="last"),
    ],
    "placeholder-is-kept": [
        AIMessage("", tool_calls=[call("c0"), call("c1")], id="m1"),
        ToolMessage("alpha", tool_call_id="c1", id="r2"),
    ],
}


@pytest.mark.parametrize("persist", [False, True])
@pytest.mark.parametrize("name", sorted(PREPARED_AGAIN))
def test_an_output_prepared_again_is_not_cut_for_its_placeholder_or_peaks(
    name, persist
):
    """Found by the adversarial suite: a history that opens with an assistant
    message gets a placeholder user turn, and a result is smaller than the
    synthetic one sent while it was open. The plan counts the placeholder as sent
    and the placeholder is no user turn (the output splits into the turns its
    history had) and is kept like the system prompt, so preparing the output
    again changes nothing. Untuned unless ``persist``: the output may no longer
    hold a reply, and the interactive settings (``interactive_tuning``) would be
    off the second time; ``prepare(persist=True)`` keeps the reply's answer."""
    history = PREPARED_AGAIN[name]
    policy = GuardPolicy(
        interactive_tuning=persist,
        context_window=150,
        reserve_tokens=0,
        uncalibrated_margin=0.0,
        safety_margin=0.0,
        trim_step=0.0,
        compress_batch=1,
        keep_recent_tool_results=0,
        keep_first_user=False,
        stable_prefix=False,
        warn_below_tokens=0,
        hard_min_tokens=0,
    )
    tried = 0
    for window in range(150, 300, 2):  # budgets around the output's size
        tuned = policy.model_copy(update={"context_window": window})
        try:
            out = ContextGuard(tuned).prepare(history, persist=persist).messages
        except BudgetExceededError:
            continue
        tried += 1
        again = ContextGuard(tuned).prepare(out, persist=persist).messages
        assert snapshot(again) == snapshot(out), window
    assert tried > 20


@pytest.mark.parametrize("limit", [0, -1])
def test_turn_limit_below_one_is_refused_as_in_the_policy(limit):
    from langchain_context_guard import ConfigError

    with pytest.raises(ConfigError, match="at least 1") as info:
        _trim(chat_history(4), 10**9, turn_limit=limit)
    assert info.value.field == "turn_limit"


def test_a_margin_outside_zero_to_one_is_refused():
    from langchain_context_guard import ConfigError

    with pytest.raises(ConfigError, match="margin") as info:
        _trim(chat_history(4), 10**9, margin=1.0)
    assert info.value.field == "margin"


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("digest", {"digest": -1}),
        ("costs_from", {"costs_from": chat_history(2)}),
    ],
    ids=["negative-digest", "costs-of-another-history"],
)
def test_what_the_guard_supplies_is_checked(field, kwargs):
    from langchain_context_guard import ConfigError

    with pytest.raises(ConfigError, match=field) as info:
        _trim(chat_history(4), 10**9, **kwargs)
    assert info.value.field == field


# ``trim_to_budget`` is ``prepare``'s trim: for a guard whose other passes leave
# the history alone, ``prepare`` sends what it returns (hygiene aside, which
# ``prepare`` applies last).
ONLY_TRIM: dict[str, Any] = {
    "stable_prefix": False,
    "digest": False,
    "compress_min_chars": 10**9,
    "max_tool_result_chars": 10**9,
    "max_tool_result_share": 1.0,
    "keep_recent_thinking": 10**6,
}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


def _as_prepare(guard: ContextGuard, history, tools) -> Any:
    """What ``trim_to_budget`` gives at ``guard``'s setting, as ``prepare`` sends it."""
    p = guard.policy
    budget = p.budget(p.context_window)  # no model: the policy's own
    try:
        trimmed = trim_to_budget(
            history,
            budget=budget,
            token_counter=COUNTER.count_message,
            keep_first_user=p.keep_first_user,
            turn_limit=p.history_limit,
            step=p.trim_step,
            extra_tokens=COUNTER.count_tools(tools) if tools else 0,
            margin=p.uncalibrated_margin,
            window=p.context_window,
        )
    except BudgetExceededError as err:
        return ("error", err.tokens, err.budget)
    return snapshot(enforce_provider_hygiene(trimmed))


def _sent(guard: ContextGuard, history, tools) -> Any:
    try:
        return snapshot(guard.prepare(history, tools=tools).messages)
    except BudgetExceededError as err:
        return ("error", err.tokens, err.budget)


@SETTINGS
@given(
    transcripts(),
    st.sampled_from([16_000, 20_000]),
    st.sampled_from([0.0, 0.15, 0.5]),
    st.booleans(),
    st.sampled_from([None, 1, 2]),
    st.sampled_from([0.0, 0.05]),
    st.booleans(),
    st.data(),
)
def test_trim_to_budget_is_what_prepare_sends_at_the_same_setting(
    history, window, step, keep_first_user, limit, margin, with_tools, data
):
    policy = GuardPolicy(
        context_window=window,
        reserve_tokens=1_000,
        trim_step=step,
        keep_first_user=keep_first_user,
        history_limit=limit,
        uncalibrated_margin=margin,
        **ONLY_TRIM,
    )
    guard = ContextGuard(policy, token_counter=COUNTER)
    tools = [read_file] if with_tools else None
    start = data.draw(st.integers(1, len(history)))
    for n in sorted({start, len(history)}):  # a cold call, then a grown one
        clean = repair_tool_pairs(sanitize_messages(history[:n]))  # as prepare trims
        assert _sent(guard, clean, tools) == _as_prepare(guard, clean, tools)


@pytest.mark.parametrize("window", [16_000, 24_000, 40_000])
@pytest.mark.parametrize("build", [agent_history, chat_history], ids=["agent", "chat"])
def test_trim_to_budget_cuts_as_prepare_on_long_histories(build, window):
    policy = GuardPolicy(context_window=window, trim_step=0.5, **ONLY_TRIM)
    guard = ContextGuard(policy, token_counter=COUNTER)
    history = build(80)
    sent = _sent(guard, history, None)
    assert sent == _as_prepare(guard, history, None)
    kept = guard.prepare(history).messages
    assert 2 < len(kept) < len(history)  # it did cut


def _asked(steps: int, hook: bool, question_chars: int = 0) -> list:
    """An agent run that ends with a question to the user, then the user's reply."""
    question = "Which layout?\n" + "\n".join(
        f"{k}. option {k}: " + "a long description " * 40 for k in range(1, 6)
    )
    question += "y" * question_chars
    history = [*agent_history(2), HumanMessage("Now the layout.", id="next")]
    for k in range(10, 10 + steps):  # one long turn: the trim drops it whole
        history.append(ai(call(f"c{k}", cmd=f"cat f{k}.py"), id=f"a{k}"))
        history.append(result(f"c{k}", "x" * 3_000, id=f"t{k}"))
    history.append(AIMessage(question, id="question"))
    if hook:
        history.append(HumanMessage("Stop hook feedback: update the notes", id="hook"))
    history.append(HumanMessage("option 3 is closest", id="reply"))
    return history


def _asking_guard(stable: bool) -> ContextGuard:
    return ContextGuard(
        GuardPolicy(
            context_window=16_000,
            reserve_tokens=2_000,
            stable_prefix=stable,
            compress_min_chars=100_000,  # results stay as they are: the trim cuts
        ),
        token_counter=COUNTER,
    )


@pytest.mark.parametrize("hook", [False, True], ids=["reply", "hook-then-reply"])
@pytest.mark.parametrize("stable", [False, True], ids=["order-free", "stable"])
def test_a_users_reply_is_sent_with_the_question_it_answers(hook, stable):
    history = _asked(30, hook)
    guard = _asking_guard(stable)
    guard.prepare(history[: -3 if hook else -2])  # the run before the question
    sent = guard.prepare(history)
    ids = [m.id for m in sent.messages]
    assert "a10" not in ids  # the budget cut the run
    tail = ["question", "hook", "reply"] if hook else ["question", "reply"]
    assert ids[-len(tail) :] == tail
    assert _total(sent.messages) <= sent.report.budget
    assert_paired(sent.messages)
    # Once the agent acts on the reply, the question is history like any other
    # (a stable prefix re-sends its last prompt while that fits: prune afresh).
    after = [*history, ai(call("c99"), id="a99"), result("c99", id="t99")]
    later = [*after, AIMessage("done", id="done"), HumanMessage("thanks", id="u2")]
    for k in range(100, 130):
        later.append(ai(call(f"c{k}", cmd=f"cat g{k}.py"), id=f"a{k}"))
        later.append(result(f"c{k}", "x" * 3_000, id=f"t{k}"))
    fresh = _asking_guard(stable=False)
    assert "question" not in [m.id for m in fresh.prepare(later).messages]


@pytest.mark.parametrize("stable", [False, True], ids=["order-free", "stable"])
def test_a_question_too_large_to_keep_goes_and_the_reply_is_still_sent(stable):
    """Keeping the question is soft: when it cannot fit with what must stay, the
    last try lets it go (as for ``drop_last`` calls) instead of raising."""
    history = _asked(30, False, question_chars=80_000)
    sent = _asking_guard(stable).prepare(history)
    assert sent.messages[-1].id == "reply"
    assert _total(sent.messages) <= sent.report.budget
    assert_paired(sent.messages)


# With a policy, ``trim_to_budget`` follows its compression: it weighs old results
# at their compressed size for good and squeezes what it keeps before dropping
# more, as ``prepare``'s trim does. The budget is drawn between the history's
# count and that count plus the margin, so the compression pass (triggered at
# the budget itself) leaves the history alone while the trim must act.
COMPRESSING = st.builds(
    GuardPolicy,
    context_window=st.just(200_000),
    keep_recent_tool_results=st.sampled_from([0, 2, 6]),
    compress_batch=st.sampled_from([1, 3, 8]),
    compress_min_chars=st.sampled_from([100, 500]),
    compress_assistant_text=st.booleans(),
    archived_results=st.booleans(),
    trim_step=st.sampled_from([0.0, 0.15, 0.5]),
    uncalibrated_margin=st.sampled_from([0.05, 0.2]),
    keep_first_user=st.booleans(),
    history_limit=st.sampled_from([None, 2]),
    tool_policies=st.sampled_from(
        [
            {},
            {"bash": {"never_compress": True}},
            {"bash": {"keep_recent": 1}},
            {"bash": {"supersede_key": "cmd"}},
            {"bash": {"drop_last": True}},
        ]
    ),
    compress_trigger=st.just(1.0),
    stable_prefix=st.just(False),
    digest=st.just(False),
    max_tool_result_chars=st.just(10**9),
    max_tool_result_share=st.just(1.0),
    keep_recent_thinking=st.just(10**6),
)


@SETTINGS
@given(transcripts(names=True), COMPRESSING, st.floats(0, 1), st.booleans())
def test_trim_to_budget_with_a_policy_is_what_prepare_sends_with_compression_on(
    history, policy, slack, with_tools
):
    tools = [read_file] if with_tools else None
    extra = COUNTER.count_tools(tools) if tools else 0
    clean = repair_tool_pairs(sanitize_messages(history))  # as prepare trims
    now = _total(clean) + extra
    budget = now + int(slack * policy.uncalibrated_margin * now)
    policy = policy.model_copy(update={"reserve_tokens": 200_000 - budget})
    guard = ContextGuard(policy, token_counter=COUNTER)
    trim = partial(
        trim_to_budget,
        clean,
        budget=budget,
        token_counter=COUNTER.count_message,
        extra_tokens=extra,
        policy=policy,
    )
    try:
        try:
            cut: Any = trim()
        except BudgetExceededError:
            cut = trim(hold=False)  # prepare's last try: drop_last calls go too
        cut = snapshot(enforce_provider_hygiene(cut))
    except BudgetExceededError as err:
        cut = ("error", err.tokens, err.budget)
    assert _sent(guard, clean, tools) == cut


@pytest.mark.parametrize("with_policy", [False, True], ids=["plain", "policy"])
def test_trim_history_names_the_messages_it_dropped(with_policy):
    from langchain_context_guard import trim_history

    history = agent_history(40, result_chars=3_000)
    policy = GuardPolicy(context_window=200_000) if with_policy else None
    kept, trimmed = trim_history(
        history,
        budget=_total(history) // 3,
        token_counter=COUNTER.count_message,
        policy=policy,
    )
    gone = set(trimmed.gone)
    assert 0 < len(gone) < len(history)
    assert [m.id for m in kept] == [
        m.id for i, m in enumerate(history) if i not in gone
    ]
    assert (
        trim_to_budget(
            history,
            budget=_total(history) // 3,
            token_counter=COUNTER.count_message,
            policy=policy,
        )
        == kept
    )
