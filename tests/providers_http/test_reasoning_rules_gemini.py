"""The Gemini stand-in refuses what Gemini refuses about thought signatures.

One test per rule (sources in ``_rules_gemini`` and ``_rules_names``): a
hand-built ``contents`` that breaks it gets Gemini's 400 and text; the loop's own
contents are answered.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ._reasoning import Body, error_of, post
from ._rules_names import GEMINI_NAME_RULE
from ._server import ProviderServer

MakeServer = Callable[..., ProviderServer]
DECLARATION = {
    "name": "read_file",
    "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
USER = {"role": "user", "parts": [{"text": "Find the checksum bug."}]}
MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is "
    "required for tools to work correctly, and missing thought_signature may lead "
    "to degraded model performance. Additional data, function call "
    "`default_api:read_file` , position {}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
INVALID = "Unable to submit request because Thought signature is not valid."
COUNT = (
    "Please ensure that the number of function response parts is equal to the "
    "number of function call parts of the function call turn."
)


def request(contents: list[Body], declarations: list[Body] | None = None) -> Body:
    """A ``generateContent`` request with one tool, thoughts included."""
    return {
        "contents": contents,
        "tools": [{"functionDeclarations": declarations or [DECLARATION]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
    }


def answers(content: Body) -> Body:
    """The user content answering ``content``'s function calls."""
    parts = [
        {"functionResponse": {"name": p["functionCall"]["name"], "response": {}}}
        for p in content["parts"]
        if "functionCall" in p
    ]
    return {"role": "user", "parts": parts}


def loop(server: ProviderServer, steps: int) -> list[Body]:
    """``steps`` replies, each sent back as it came, with its calls answered."""
    contents: list[Body] = [USER]
    for _ in range(steps):
        answer = post(server, "gemini", request(contents))
        assert answer.status_code == 200, answer.text
        reply = answer.json()["candidates"][0]["content"]
        contents += [reply, answers(reply)]
    return contents


def test_replies_carry_thoughts_and_signed_calls(make_server: MakeServer) -> None:
    server = make_server()
    reply = loop(server, 1)[1]
    thought, text, call = reply["parts"]
    assert thought["thought"] is True and "thoughtSignature" not in text
    assert call["functionCall"]["name"] == "read_file" and call["thoughtSignature"]


def test_a_call_of_the_current_turn_keeps_its_signature(
    make_server: MakeServer,
) -> None:
    server = make_server()
    contents = loop(server, 2)
    assert post(server, "gemini", request(contents)).status_code == 200
    unsigned = copy.deepcopy(contents)
    del unsigned[3]["parts"][2]["thoughtSignature"]
    assert error_of(post(server, "gemini", request(unsigned))) == MISSING.format(3)
    # An earlier turn (before the last user text) is not checked.
    later = [*unsigned, {"role": "model", "parts": [{"text": "Done."}]}, USER]
    assert post(server, "gemini", request(later)).status_code == 200


@pytest.mark.parametrize("change", ["args", "signature"])
def test_a_signature_vouches_for_its_own_part(
    make_server: MakeServer, change: str
) -> None:
    server = make_server()
    contents = loop(server, 1)
    call = contents[1]["parts"][2]
    if change == "args":
        call["functionCall"]["args"] = {"path": "src/other.py"}
    else:
        call["thoughtSignature"] = "AAAA" + call["thoughtSignature"][4:]
    assert error_of(post(server, "gemini", request(contents))) == INVALID


def test_every_call_is_answered_in_the_next_turn(make_server: MakeServer) -> None:
    server = make_server()
    contents = loop(server, 1)
    assert error_of(post(server, "gemini", request(contents[:2]))) == COUNT
    twice = copy.deepcopy(contents)
    twice[2]["parts"] *= 2
    assert error_of(post(server, "gemini", request(twice))) == COUNT
    orphan = [USER, contents[2]]
    assert error_of(post(server, "gemini", request(orphan))) == (
        "Please ensure that function response turn comes immediately after a "
        "function call turn."
    )


@pytest.mark.parametrize(
    "name", ["repo.read_file", "mcp:repo:read", "_private-tool", "a" * 64]
)
def test_names_gemini_allows(make_server: MakeServer, name: str) -> None:
    server = make_server()
    body = request([USER], [{**DECLARATION, "name": name}])
    assert post(server, "gemini", body).status_code == 200


@pytest.mark.parametrize("name", ["1read", "read file", "a" * 65, "read/file"])
def test_names_gemini_refuses(make_server: MakeServer, name: str) -> None:
    server = make_server()
    body = request([USER], [{**DECLARATION, "name": name}])
    assert error_of(post(server, "gemini", body)) == (
        "* GenerateContentRequest.tools[0].function_declarations[0].name: "
        f"{GEMINI_NAME_RULE}\n"
    )
    call: dict[str, Any] = {"functionCall": {"name": name, "args": {}}}
    history = [USER, {"role": "model", "parts": [call]}, answers({"parts": [call]})]
    assert error_of(post(server, "gemini", request(history))) == (
        f"* GenerateContentRequest.contents[1].parts[0].function_call.name: "
        f"{GEMINI_NAME_RULE}\n"
    )


def test_an_over_long_prompt_gets_geminis_error(make_server: MakeServer) -> None:
    server = make_server(limit=1_000)
    heavy = {"role": "user", "parts": [{"text": "word " * 2_000}]}
    answer = post(server, "gemini", request([heavy]))
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert error_of(answer) == (
        f"The input token count ({server.exchanges[-1].tokens}) exceeds the maximum "
        "number of tokens allowed (1000)."
    )
