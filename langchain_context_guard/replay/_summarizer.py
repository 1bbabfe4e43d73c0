"""The replay's summary model: deterministic, offline, and every call recorded.

``ScriptedSummarizer`` answers a summary prompt with the identifiers (paths, code
names, numbers) of the conversation it was shown, newest first: roughly what a
good LLM summary keeps. It reads the conversation where each prompt puts it:

- LangChain's ``SummarizationMiddleware``: the text after "Messages to summarize:".
- Our serialised prompt (``summary_mode="serialize"``): the last message, which
  quotes the previous summary and the conversation (each message cut to
  ``max_input_chars``).
- Our appended prompt (``summary_mode="append"``): the messages themselves, whole,
  less the system prompt and the last ones the instruction says are kept.

Asked for our sections, it fills them by kind: the last commands the agent ran
(completed), file paths (files), other code names (current state) and numbers
(notes); "remaining" stays empty, a plan it cannot know. Each call's input
messages and reply are kept (``calls``) so the replay can bill them.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from ..engine import text_of
from ._metrics import TOKEN, identifiers, message_text

PROVIDER = "google_genai"
"""``model_provider`` put on replayed replies, as LangChain's Gemini chat model does."""
_KEPT = re.compile(r"Everything before its last (\d+) message\(s\)")
_CALLED = re.compile(r"^\[assistant called [^\]]*\] (.*)$", re.M)
_FILE = re.compile(r"[\w-]+\.[A-Za-z]{1,5}")
_COMMANDS = 3
"""Commands listed under "completed", newest first."""
_COMMAND_CHARS = 120


class SummaryCall(NamedTuple):
    """One summary call: the messages it was sent and the text it answered."""

    prompt: tuple[BaseMessage, ...]
    reply: str


class Shown(NamedTuple):
    """What one summary prompt gives the summarizer to work with."""

    text: str
    """The conversation's text (tool-call arguments included)."""
    commands: list[str]
    """The commands the agent ran in it, oldest first."""
    sections: bool
    """Whether the prompt asks for our sections."""


def shown(messages: list[BaseMessage]) -> Shown:
    """The conversation a summary prompt shows, wherever the prompt puts it."""
    last = text_of(messages[-1].content)
    asks = "<completed>" in last or "<completed>" in text_of(messages[0].content)
    kept = _KEPT.search(last)
    if kept is None:
        body = last.rsplit("Messages to summarize:", 1)[-1]
        commands = [_command(args) for args in _CALLED.findall(body)]
        return Shown(body, commands, asks)
    end = len(messages) - 1 - int(kept.group(1))
    history = [m for m in messages[:end] if not isinstance(m, SystemMessage)]
    commands = [
        _command(json.dumps(call["args"]))
        for m in history
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]
    return Shown("\n".join(map(message_text, history)), commands, asks)


def _command(args: str) -> str:
    """A tool call's command (or its arguments), one line, cut."""
    try:
        value: Any = json.loads(args)
    except ValueError:
        value = args
    if isinstance(value, dict):
        value = value.get("command", json.dumps(value))
    line = " ".join(str(value).split())
    return line[:_COMMAND_CHARS]


class ScriptedSummarizer(BaseChatModel):
    """A deterministic, offline stand-in for the summary model (module docstring)."""

    max_chars: int = 2_000
    calls: list[SummaryCall] = Field(default_factory=list)
    """Every call since the last ``take_calls``."""

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": PROVIDER, "ls_model_type": "chat"}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        seen = shown(messages)
        text = _sections(seen, self.max_chars) if seen.sections else None
        reply = AIMessage(text or _artifacts(seen.text, self.max_chars))
        self.calls.append(SummaryCall(tuple(messages), reply.text))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def take_calls(self) -> tuple[SummaryCall, ...]:
        """The calls since the last take; forgets them."""
        calls = tuple(self.calls)
        del self.calls[:]
        return calls


def _names(text: str) -> list[str]:
    """The identifiers of ``text``, newest first."""
    found = identifiers(text)
    names = (raw.strip("./-") for raw in reversed(TOKEN.findall(text)))
    return [name for name in dict.fromkeys(names) if name in found]


def _artifacts(text: str, max_chars: int) -> str:
    lines, size = ["## ARTIFACTS"], 12
    for name in _names(text):
        if size + len(name) + 1 <= max_chars:
            lines.append(name)
            size += len(name) + 1
    return "\n".join(lines)


def _sections(seen: Shown, max_chars: int) -> str | None:
    """Our five tagged sections, filled by kind within ``max_chars``."""
    filled: dict[str, list[str]] = {
        "completed": [],
        "remaining": [],
        "current_state": [],
        "files": [],
        "notes": [],
    }
    size = 0
    items = [("completed", c) for c in reversed(seen.commands[-_COMMANDS:])]
    for name in _names(seen.text):
        if name.isdigit():
            items.append(("notes", name))
        elif "/" in name or _FILE.fullmatch(name):
            items.append(("files", name))
        else:
            items.append(("current_state", name))
    for key, item in items:
        if size + len(item) + 3 <= max_chars:
            filled[key].append(item)
            size += len(item) + 3
    if not any(filled.values()):
        return None
    return "\n".join(
        f"<{key}>\n" + "".join(f"- {item}\n" for item in lines) + f"</{key}>"
        for key, lines in filled.items()
    )
