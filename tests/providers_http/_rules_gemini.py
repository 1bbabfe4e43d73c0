"""Gemini's ``generateContent``: what the stand-in counts and refuses, and its ledger.

Where each rule comes from (https://ai.google.dev/gemini-api/docs/thought-signatures,
https://ai.google.dev/gemini-api/docs/function-calling):

- In the current turn (the contents after the last user turn that holds text),
  the first ``functionCall`` part of each model step carries the
  ``thoughtSignature`` it came with ("Function call is missing a
  thought_signature in functionCall parts. ...", the API's text as public
  reports quote it; the position it names is the content's index [inferred]).
- A signature is the one the server issued for that exact part: a part whose
  call or text changed under a kept signature is refused ("Unable to submit
  request because Thought signature is not valid.", as reported; [inferred] for
  this cause). Earlier turns are not checked, as the docs say.
- Every function call turn is answered by the next content, with as many
  ``functionResponse`` parts as calls ("Please ensure that the number of function
  response parts is equal to the number of function call parts of the function
  call turn.", and "Please ensure that function response turn comes immediately
  after a function call turn.": the API's texts as public reports quote them).
- Function names: see ``_rules_names``.
- Over the limit: "The input token count (N) exceeds the maximum number of tokens
  allowed (M).", the API's text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ._rules import Body, Refusal, tokens
from ._rules_names import gemini_violation as name_violation


def gemini_error(message: str, kind: str = "invalid") -> Refusal:
    """A 400 in Gemini's error body."""
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    return Refusal(400, body, kind)  # type: ignore[arg-type]


def _part_tokens(part: Body) -> int:
    if "text" in part:
        return tokens(part["text"])
    if "functionCall" in part:
        call = part["functionCall"]
        return tokens(call["name"]) + tokens(json.dumps(call.get("args") or {}))
    if "functionResponse" in part:
        return tokens(json.dumps(part["functionResponse"].get("response") or {}))
    return 258  # an inline image or file


def gemini_tokens(body: Body, multiplier: float) -> int:
    """Prompt tokens of a ``generateContent`` request."""
    system = (body.get("systemInstruction") or {}).get("parts") or []
    raw = 3 + sum(_part_tokens(p) for p in system)
    tools = body.get("tools")
    raw += tokens(json.dumps(tools, sort_keys=True)) if tools else 0
    for content in body.get("contents") or []:
        raw += 3 + sum(_part_tokens(p) for p in content.get("parts") or [])
    return math.ceil(raw * multiplier)


def gemini_too_long(requested: int, limit: int) -> Refusal:
    """Gemini's answer to a prompt over the context window."""
    return gemini_error(
        f"The input token count ({requested}) exceeds the maximum number of tokens "
        f"allowed ({limit}).",
        "too_long",
    )


def canonical(part: Body) -> str:
    """What a signature vouches for: the call, or the text, of a part."""
    if "functionCall" in part:
        call = part["functionCall"]
        return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)
    return json.dumps(part.get("text"))


def raw(signature: str) -> bytes:
    """A signature's bytes: the API's field is bytes, in either base64 alphabet."""
    return base64.urlsafe_b64decode(signature.replace("+", "-").replace("/", "_"))


@dataclass
class Ledger:
    """The thought signatures one server issued, and the parts they went on."""

    secret: bytes = b"stand-in thought key"
    issued: dict[bytes, str] = field(default_factory=dict)

    def sign(self, part: Body, index: int) -> str:
        """A signature for ``part`` (reply ``index``), recorded."""
        text = f"{index}:{canonical(part)}"
        digest = hmac.new(self.secret, text.encode(), hashlib.sha256).digest()
        self.issued[digest] = canonical(part)
        return base64.b64encode(digest).decode()

    def vouches(self, signature: str, part: Body) -> bool:
        """``signature`` was issued for exactly ``part``."""
        try:
            key = raw(signature)
        except ValueError:
            return False
        return self.issued.get(key) == canonical(part)


def _calls(content: Body) -> list[Body]:
    return [p for p in content.get("parts") or [] if "functionCall" in p]


def _responses(content: Body) -> list[Body]:
    return [p for p in content.get("parts") or [] if "functionResponse" in p]


def _pairing(contents: list[Body]) -> Refusal | None:
    for i, content in enumerate(contents):
        answered = _responses(content)
        asked = _calls(contents[i - 1]) if i else []
        if answered and not asked:
            return gemini_error(
                "Please ensure that function response turn comes immediately after "
                "a function call turn."
            )
        if asked and len(answered) != len(asked):
            return gemini_error(
                "Please ensure that the number of function response parts is equal "
                "to the number of function call parts of the function call turn."
            )
    if contents and _calls(contents[-1]):
        return gemini_error(
            "Please ensure that the number of function response parts is equal to "
            "the number of function call parts of the function call turn."
        )
    return None


def current_turn(contents: list[Body]) -> int:
    """Index of the first content after the last user turn that holds text."""
    starts = [
        i + 1
        for i, c in enumerate(contents)
        if c.get("role", "user") == "user"
        and any("text" in p for p in c.get("parts") or [])
    ]
    return starts[-1] if starts else 0


def gemini_violation(body: Body, ledger: Ledger) -> Refusal | None:
    """The first rule the request breaks, as Gemini words it."""
    named = name_violation(body)
    if named is not None:
        return gemini_error(named)
    contents: list[Any] = body.get("contents") or []
    broken = _pairing(contents)
    if broken is not None:
        return broken
    for i in range(current_turn(contents), len(contents)):
        if contents[i].get("role") != "model":
            continue
        calls = _calls(contents[i])
        if calls and not calls[0].get("thoughtSignature"):
            name = calls[0]["functionCall"].get("name")
            return gemini_error(
                "Function call is missing a thought_signature in functionCall parts. "
                "This is required for tools to work correctly, and missing "
                "thought_signature may lead to degraded model performance. "
                f"Additional data, function call `default_api:{name}` , position "
                f"{i}. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more "
                "details."
            )
        for part in contents[i].get("parts") or []:
            signature = part.get("thoughtSignature")
            if signature and not ledger.vouches(signature, part):
                return gemini_error(
                    "Unable to submit request because Thought signature is not valid."
                )
    return None
