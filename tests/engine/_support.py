"""Builders and checks shared by the engine tests."""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import BudgetExceededError, ContextGuard, pin


def call(call_id: str, name: str = "bash", **args: Any) -> dict[str, Any]:
    """A LangChain tool call dict."""
    return {"id": call_id, "name": name, "args": args or {"cmd": call_id}}


def ai(*calls: dict[str, Any], content: Any = "", **kwargs: Any) -> AIMessage:
    """An assistant message making ``calls``."""
    return AIMessage(content=content, tool_calls=list(calls), **kwargs)


def result(call_id: str, content: Any = "ok", **kwargs: Any) -> ToolMessage:
    """A tool result answering ``call_id``."""
    return ToolMessage(content=content, tool_call_id=call_id, **kwargs)


def lines(n: int, prefix: str = "line") -> str:
    """``n`` numbered lines of text."""
    return "\n".join(f"{prefix} {i}: some tool output here" for i in range(n))


def agent_history(
    steps: int, *, result_chars: int = 2_000, task: str = "Fix the bug."
) -> list[BaseMessage]:
    """System + task, then ``steps`` assistant-call + tool-result pairs."""
    history: list[BaseMessage] = [
        SystemMessage("You are a coding agent.", id="sys"),
        HumanMessage(task, id="task"),
    ]
    for k in range(steps):
        history.append(ai(call(f"c{k}", cmd=f"cat f{k}.py"), id=f"a{k}"))
        body = lines(max(result_chars // 36, 1), prefix=f"r{k}")
        history.append(result(f"c{k}", body[:result_chars], id=f"t{k}"))
    return history


def chat_history(turns: int, *, words: int = 200) -> list[BaseMessage]:
    """System, then ``turns`` user/assistant exchanges, each with one tool call."""
    history: list[BaseMessage] = [SystemMessage("Be helpful.", id="sys")]
    for t in range(turns):
        history.append(HumanMessage(f"question {t} " + "word " * words, id=f"u{t}"))
        history.append(ai(call(f"q{t}"), id=f"a{t}"))
        history.append(result(f"q{t}", "data " * words, id=f"t{t}"))
        history.append(AIMessage(f"answer {t} " + "text " * words, id=f"r{t}"))
    return history


def snapshot(messages: Sequence[BaseMessage]) -> str:
    """A byte-exact JSON image of ``messages`` (for unchanged/deterministic checks)."""
    return json.dumps(
        [[type(m).__name__, m.model_dump(warnings=False)] for m in messages],
        sort_keys=True,
        default=repr,
    )


def pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """Violations of: every call answered once, right after it; no stray result."""
    errors: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolMessage):
            errors.append(f"stray result {m.tool_call_id!r} at {i}")
            i += 1
            continue
        i += 1
        if isinstance(m, AIMessage) and m.tool_calls:
            want = [c["id"] for c in m.tool_calls]
            got: list[str] = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                got.append(messages[i].tool_call_id)  # type: ignore[attr-defined]
                i += 1
            if sorted(got) != sorted(want):
                errors.append(f"call ids {want} answered by {got}")
    return errors


def assert_paired(messages: Sequence[BaseMessage]) -> None:
    """Fail with the pairing violations, if any."""
    errors = pairing_errors(messages)
    assert not errors, errors


IMAGE = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64," + "QUJD" * 2_000},
}
THINKING = {"type": "thinking", "thinking": "pondering " * 30, "signature": "c2ln"}


REDACTED = {"type": "redacted_thinking", "data": "ZW5j" * 40}
ANTHROPIC_COMPACTION = {
    "type": "compaction",
    "content": "Summary of the work so far: " + "done " * 80,
}
OPENAI_COMPACTION = {
    "type": "compaction",
    "id": "cmp_1",
    "encrypted_content": "Z0FBQUFB" * 60,
}
NATIVE_BLOCKS: list[list[object]] = [
    [],
    [],
    [],
    [REDACTED],
    [{"type": "thinking", "thinking": "weighing " * 20, "signature": "c2lnMg=="}],
    [ANTHROPIC_COMPACTION],
    [OPENAI_COMPACTION],
]
"""Blocks put first in an assistant message (none, most often)."""


def filler(seed: int, words: int) -> str:
    """Deterministic filler text of ``words`` words."""
    return " ".join(f"w{(seed * 7 + i) % 997}" for i in range(words)) or "x"


@st.composite
def transcripts(  # noqa: C901
    draw: Any,
    *,
    usage: bool = False,
    names: bool = False,
    native: bool = False,
    pins: bool = False,
) -> list[BaseMessage]:
    """Agent transcripts: parallel calls, thinking, images, misplaced results.

    ``names``: some results name their tool (``ToolMessage.name``), as tool
    nodes set it, so per-tool policies apply to them. ``native``: also signed
    and redacted reasoning and provider compaction blocks (Anthropic's and
    OpenAI's shapes) at random places. ``pins``: up to four messages pinned
    (``pin``): results, assistant messages, user or system messages.
    """
    out: list[BaseMessage] = []
    serial = 0
    for _ in range(draw(st.integers(0, 2))):
        out.append(SystemMessage(filler(serial, draw(st.integers(1, 300)))))
        serial += 1
    pending: list[ToolMessage] = []  # results to misplace later
    for turn in range(draw(st.integers(1, 5))):
        content: object = filler(serial, draw(st.integers(1, 400)))
        if draw(st.booleans()):
            content = [{"type": "text", "text": content}, IMAGE]
        out.append(HumanMessage(content, id=f"u{turn}"))
        for step in range(draw(st.integers(0, 5))):
            n_calls = draw(st.integers(0, 3))
            ids = [f"c{turn}-{step}-{j}" for j in range(n_calls)]
            blocks: list[object] = [THINKING] if draw(st.booleans()) else []
            if native:
                blocks = [*draw(st.sampled_from(NATIVE_BLOCKS)), *blocks]
            blocks.append(
                {"type": "text", "text": filler(serial, draw(st.integers(0, 60)))}
            )
            kwargs = {}
            if usage and draw(st.booleans()):
                n = draw(st.integers(100, 30_000))
                kwargs["usage_metadata"] = {
                    "input_tokens": n,
                    "output_tokens": 50,
                    "total_tokens": n + 50,
                }
            # With names, some calls run a command again (superseded reads), and
            # some write what others read ("write", a writing tool's outdated reads).
            again = ["make test", "cat a.py"] if names else []
            tools = {
                i: draw(st.sampled_from(["bash", "bash", "write"])) if names else "bash"
                for i in ids
            }
            args = {i: {"cmd": draw(st.sampled_from([i, i, *again]))} for i in ids}
            for i in ids:  # a write's payload: a file's text, long or short
                if tools[i] == "write":
                    args[i]["content"] = filler(serial, draw(st.sampled_from([5, 900])))
            out.append(
                AIMessage(
                    blocks,
                    tool_calls=[
                        {"id": i, "name": tools[i], "args": args[i]} for i in ids
                    ],
                    id=f"a{turn}-{step}",
                    **kwargs,
                )
            )
            for i in ids:
                size = draw(st.sampled_from([1, 50, 800, 6_000]))
                name = draw(st.sampled_from([tools[i], None])) if names else None
                res = ToolMessage(
                    filler(serial, size), tool_call_id=i, id=f"r{i}", name=name
                )
                serial += 1
                fate = draw(
                    st.sampled_from(["ok"] * 6 + ["missing", "duplicate", "displaced"])
                )
                if fate == "ok":
                    out.append(res)
                elif fate == "duplicate":
                    out.extend([res, res.model_copy(update={"id": f"d{i}"})])
                elif fate == "displaced":
                    pending.append(res)
        if draw(st.booleans()):
            out.append(
                AIMessage(filler(serial, draw(st.integers(1, 200))), id=f"f{turn}")
            )
    if pending and draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), pending[0])
    if draw(st.booleans()):
        out.append(ToolMessage("stray", tool_call_id="nobody", id="orphan"))
    if pins and out:
        for i in draw(st.lists(st.integers(0, len(out) - 1), max_size=4)):
            out[i] = pin(out[i])
    return out


POLICY_KNOBS: dict[str, Any] = {
    "context_window": st.sampled_from([16_000, 20_000, 40_000]),
    "reserve_tokens": st.sampled_from([1_000, 4_000]),
    "compress_batch": st.sampled_from([1, 3, 8]),
    "keep_recent_tool_results": st.sampled_from([0, 2, 6]),
    "keep_recent_thinking": st.sampled_from([0, 1]),
    "trim_step": st.sampled_from([0.0, 0.15, 0.5]),
    "compress_trigger": st.sampled_from([0.0, 0.5]),
    "tool_policies": st.sampled_from(
        [
            {},
            {"bash": {"max_result_chars": 1_000}},
            {"bash": {"never_compress": True}},
            {"bash": {"max_result_chars": 500, "never_compress": True}},
            {"bash": {"keep_recent": 1}},
            {"bash": {"keep_recent": 4}},
            {"bash": {"supersede_key": "cmd"}},
            {"bash": {"keep_recent": 0, "supersede_key": "cmd"}},
            {"bash": {"supersede_key": ["cmd", "offset"]}},  # several arguments
            {"bash": {"drop_last": True}},
            {"bash": {"drop_last": True, "supersede_key": "cmd"}},
            {"bash": {"supersede_key": "cmd"}, "write": {"write_key": "cmd"}},
            {"bash": {"supersede_key": ["cmd", "offset"]}, "w*": {"write_key": "cmd"}},
            # Patterns: an exact name wins, then the first pattern that matches.
            {"b*": {"max_result_chars": 1_000}},
            {"ba?h": {"keep_recent": 1, "supersede_key": "cmd"}},
            {"[ab]ash": {"drop_last": True}},
            {"bash": {"never_compress": True}, "*": {"keep_recent": 0}},
            {
                "mcp__*": {"never_compress": True},
                "b*": {"supersede_key": "cmd"},
                "*": {"drop_last": True},
            },
        ]
    ),
    "exclude_tools": st.sampled_from([(), ("bash",), ("b*",), ("mcp__*",)]),
    # The order-free pipeline; test_stable.py: the stable prefix.
    "stable_prefix": st.just(False),
}
"""Policies the incremental and reference property tests draw from."""


def fresh_like(guard: ContextGuard) -> ContextGuard:
    """A new guard with ``guard``'s calibration memory but no previous call.

    It keeps ``guard``'s record of what it sent to each conversation: signed
    reasoning is held to the prompt that produced it (``_bound_thinking``).
    """
    fresh = ContextGuard(guard.policy, token_counter=guard.counter)
    fresh._sent = OrderedDict(guard._sent)
    fresh._stables = OrderedDict(guard._stables)
    fresh._ends = OrderedDict(guard._ends)
    fresh._ratios = dict(guard._ratios)
    return fresh


def live_usage(
    history: list[BaseMessage],
    guard: ContextGuard,
    ratios: list[float],
    check: Callable[[ContextGuard, list[BaseMessage]], None],
) -> list[BaseMessage]:
    """Grow ``history`` call by call as an agent records it: each reply carries the
    usage of the prompt the guard sent before it (a ratio x the guard's count, the
    ratios taken in turn); ``check(guard, history so far)`` runs before each call."""
    lived: list[BaseMessage] = []
    turns = itertools.cycle(ratios)
    for message in history:
        if isinstance(message, AIMessage):
            check(guard, lived)
            try:
                sent = guard.prepare(lived).messages
            except BudgetExceededError:
                sent = lived
            ours = sum(map(guard.counter.count_message, sent))
            usage = {"input_tokens": int(ours * next(turns)), "output_tokens": 20}
            usage["total_tokens"] = usage["input_tokens"] + 20
            message = message.model_copy(update={"usage_metadata": usage})
        lived.append(message)
    return lived
