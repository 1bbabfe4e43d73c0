"""The demo's offline stand-ins: a scripted agent model and a scripted summarizer."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import (
    InputTokenDetails,
    OutputTokenDetails,
    UsageMetadata,
)
from langchain_core.outputs import ChatGeneration, ChatResult

from ..engine import count_messages, text_of
from ._demo_repo import BUG_FILE, FACT, FACT_FILE

_CALLS_MADE = re.compile(r"made (\d+) tool calls")
"""What a previous summary says of the calls made before it."""
_PATH = re.compile(r"\b(?:shopfront|logs|docs|tests)/[\w/.-]+\.\w+|\bREADME\.md\b")


class ScriptedAgentModel(BaseChatModel):
    """An offline chat model that follows a fixed plan of tool calls, then answers.

    The next step is read from the history (one past the newest ``call_<k>`` id it
    can see), so the model is stateless: it acts only on what it was sent. After
    the plan it answers from the tool outputs in its input. The answer quotes the
    billing docs' rounding rule (:data:`FACT`) only if a tool output it was sent
    holds it; when none does but its input still mentions :data:`FACT_FILE` (an
    old tool call, the digest of trimmed turns, a summary), it reads the file back
    first, as a real agent would. Like a provider, it reports ``usage_metadata``
    (counted with ``token_counter``, tool schemas included).
    """

    plan: list[tuple[str, dict[str, Any], str]]
    token_counter: Any = None
    tool_tokens: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Accept tools like a real model; their schemas count in usage."""
        n = self.token_counter.count_tools(list(tools)) if self.token_counter else 0
        return self.model_copy(update={"tool_tokens": n})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        step = next_step(messages)
        if step < len(self.plan):
            name, args, thought = self.plan[step]
            call = {"name": name, "args": args, "id": f"call_{step}"}
            message = AIMessage(thought, tool_calls=[call], id=f"ai_{step}")
        elif step == len(self.plan) and needs_read_back(messages):
            call = {"name": "cat", "args": {"path": FACT_FILE}, "id": f"call_{step}"}
            thought = f"I read {FACT_FILE} earlier but can no longer see it: again."
            message = AIMessage(thought, tool_calls=[call], id=f"ai_{step}")
        else:
            message = AIMessage(answer_from(messages), id=f"ai_{step}")
        if self.token_counter is not None:
            sent = count_messages(messages, self.token_counter, anchoring=False)
            out = self.token_counter.count_message(message)
            message.usage_metadata = UsageMetadata(
                input_tokens=sent + self.tool_tokens,
                output_tokens=out,
                total_tokens=sent + self.tool_tokens + out,
                input_token_details=InputTokenDetails(),
                output_token_details=OutputTokenDetails(),
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def next_step(messages: Sequence[BaseMessage]) -> int:
    """One past the highest ``call_<k>`` tool call id in ``messages``."""
    seen = [
        int(str(call["id"]).removeprefix("call_"))
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if str(call.get("id")).removeprefix("call_").isdigit()
    ]
    return max(seen, default=-1) + 1


def fact_in(messages: Sequence[BaseMessage]) -> bool:
    """Whether a tool output in ``messages`` holds the rounding rule :data:`FACT`."""
    return any(
        isinstance(m, ToolMessage) and FACT in text_of(m.content) for m in messages
    )


def needs_read_back(messages: Sequence[BaseMessage]) -> bool:
    """The rule is not in view, but something in view says where it was read."""
    if fact_in(messages):
        return False
    return any(
        FACT_FILE in text_of(m.content)
        or FACT_FILE in str(getattr(m, "tool_calls", ""))
        for m in messages
    )


def answer_from(messages: Sequence[BaseMessage]) -> str:
    """The final answer, from the evidence in the tool outputs it was sent."""
    lines: list[str] = []
    for m in reversed(messages):
        if isinstance(m, ToolMessage) and "def apply_discount" in text_of(m.content):
            lines = text_of(m.content).splitlines()
            break
    bad = next((ln for ln in lines if "round(" in ln and ", 1)" in ln), None)
    if bad is None:
        return "I could not pin down the cause from what I can see."
    line = bad.split(":")[1]
    cause = (
        f"The cause is apply_discount in {BUG_FILE}: line {line} rounds the "
        "discounted total to one decimal (round(discounted, 1)), so invoices lose "
        "the cent the logs report as 'invoice total mismatch'."
    )
    if fact_in(messages):
        return (
            f"{cause} {FACT_FILE} says: {FACT} So quantize to Decimal('0.01') "
            "with ROUND_HALF_UP instead."
        )
    return (
        f"{cause} Round to cents; I cannot see the billing docs' rounding rule, "
        "so check it before fixing."
    )


def scripted_summary(messages: Sequence[BaseMessage]) -> str:
    """A summarizer for compaction: the files read and errors seen, and the calls.

    Given the messages to summarise (the previous summary first, if any), as
    ``CompactionMiddleware`` gives a function. The tool calls they made are
    counted, and added to those the previous summary counted, so the count is of
    the whole run so far.
    """
    text = "\n".join(text_of(m.content) for m in messages)
    files = sorted(set(_PATH.findall(text)))
    errors = list(
        dict.fromkeys(ln.strip() for ln in text.splitlines() if " ERROR " in ln)
    )
    earlier = sum(int(n) for n in _CALLS_MADE.findall(text))
    calls = earlier + sum(len(getattr(m, "tool_calls", None) or []) for m in messages)
    state = [f"seen in the logs: {e}" for e in errors[:3]] or ["no errors seen yet"]
    items = {
        "completed": [f"made {calls} tool calls exploring the repository"],
        "remaining": ["find the code that causes the one-cent invoice mismatches"],
        "current_state": state,
        "files": [f"{f}: read" for f in files[:40]],
    }
    return "\n".join(
        f"<{tag}>\n" + "\n".join(f"- {item}" for item in lines) + f"\n</{tag}>"
        for tag, lines in items.items()
    )
