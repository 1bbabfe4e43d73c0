"""The Gemini stand-in's answers: a ``GenerateContentResponse``, as JSON or SSE.

A reply's parts: a thought summary (``thought: true``) when the request's
``thinkingConfig.includeThoughts`` asks for it, the text, then the function call
carrying its ``thoughtSignature``; a final answer carries its signature on the
text part (https://ai.google.dev/gemini-api/docs/thought-signatures).
"""

from __future__ import annotations

from ._replies import Event, Step, Usage
from ._rules import Body, tokens
from ._rules_gemini import Ledger


def parts(step: Step, body: Body, ledger: Ledger) -> list[Body]:
    """The reply's parts, signed in ``ledger``."""
    config = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    out: list[Body] = []
    if config.get("includeThoughts"):
        out.append({"text": step.thought, "thought": True})
    if step.tool is None:
        answer: Body = {"text": step.text}
        answer["thoughtSignature"] = ledger.sign(answer, step.index)
        return [*out, answer]
    call: Body = {"functionCall": {"name": step.tool, "args": step.arguments}}
    call["thoughtSignature"] = ledger.sign(call, step.index)
    return [*out, {"text": step.text}, call]


def response(step: Step, body: Body, usage: Usage, reply: list[Body]) -> Body:
    """A ``GenerateContentResponse``."""
    thoughts = tokens(step.thought)
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": reply},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": usage.prompt,
            "candidatesTokenCount": max(usage.output - thoughts, 0),
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": usage.prompt + usage.output,
        },
        "modelVersion": str(body.get("model", "")),
        "responseId": f"resp-{step.index:04d}",
    }


def stream(whole: Body) -> list[Event]:
    """``streamGenerateContent?alt=sse``: the whole reply in one chunk."""
    return [(None, whole)]
