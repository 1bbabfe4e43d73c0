"""The Responses API stand-in refuses what OpenAI refuses about reasoning items.

One test per rule (sources in ``_rules_responses``): a hand-built ``input`` that
breaks it gets OpenAI's 400 and text; the loop's own input is answered.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ._reasoning import Body, error_of, post
from ._server import ProviderServer

MakeServer = Callable[..., ProviderServer]
TOOL = {
    "type": "function",
    "name": "read_file",
    "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
USER = {"type": "message", "role": "user", "content": "Find the checksum bug."}


def request(items: list[Body], **more: Any) -> Body:
    """A Responses request with reasoning, stateless, encrypted reasoning back."""
    body = {
        "model": "gpt-5-mini",
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tools": [TOOL],
    }
    return {**body, "input": items, **more}


def loop(server: ProviderServer, steps: int, **more: Any) -> list[Body]:
    """``steps`` replies, each sent back as it came, with its calls answered."""
    items: list[Body] = [USER]
    for _ in range(steps):
        answer = post(server, "responses", request(items, **more))
        assert answer.status_code == 200, answer.text
        output = answer.json()["output"]
        items += output
        items += [
            {"type": "function_call_output", "call_id": o["call_id"], "output": "x"}
            for o in output
            if o["type"] == "function_call"
        ]
    return items


def kinds(items: list[Body]) -> list[str]:
    """The items' types."""
    return [i.get("type", "message") for i in items]


def test_replies_carry_reasoning_items(make_server: MakeServer) -> None:
    server = make_server(tool_steps=1)
    items = loop(server, 2)
    assert kinds(items) == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
    ]
    assert items[1]["encrypted_content"] and items[1]["summary"]
    usage = server.accepted[-1].usage
    assert usage is not None and usage.output > 0
    plain = post(server, "responses", request([USER], include=[])).json()["output"]
    assert "encrypted_content" not in plain[0]
    bare = request([USER])
    del bare["reasoning"]
    assert kinds(post(server, "responses", bare).json()["output"]) == ["message"]


def test_a_reasoning_item_is_followed_by_its_item(make_server: MakeServer) -> None:
    server = make_server()
    items = loop(server, 2)
    assert post(server, "responses", request(items)).status_code == 200
    user, rs0, fc0, out0, rs1, fc1, out1 = items
    joined = [user, rs0, rs1, fc0, fc1, out0, out1]  # two replies merged
    assert error_of(post(server, "responses", request(joined))) == (
        "Item 'rs_0000' of type 'reasoning' was provided without its required "
        "following item."
    )
    alone = [user, rs0]
    assert "rs_0000" in error_of(post(server, "responses", request(alone)))


@pytest.mark.parametrize("store", [False, True])
def test_an_item_keeps_the_reasoning_it_came_with(
    make_server: MakeServer, store: bool
) -> None:
    server = make_server(tool_steps=1)
    items = loop(server, 2, store=store)
    user, rs0, fc0, out0, _, msg1 = items
    assert error_of(post(server, "responses", request([user, fc0, out0]))) == (
        "Item 'fc_0000' of type 'function_call' was provided without its required "
        "'reasoning' item: 'rs_0000'."
    )
    stripped = [user, rs0, fc0, out0, msg1]
    assert error_of(post(server, "responses", request(stripped, store=store))) == (
        "Item 'msg_0001' of type 'message' was provided without its required "
        "'reasoning' item: 'rs_0001'."
    )
    anonymous = {k: v for k, v in msg1.items() if k != "id"}  # no id: not tied
    kept = [user, rs0, fc0, out0, anonymous]
    assert post(server, "responses", request(kept, store=store)).status_code == 200


def test_encrypted_content_comes_back_unchanged(make_server: MakeServer) -> None:
    server = make_server()
    items = loop(server, 1)
    tampered = copy.deepcopy(items)
    tampered[1]["encrypted_content"] = tampered[1]["encrypted_content"][:-4] + "AAA="
    answer = post(server, "responses", request(tampered))
    assert error_of(answer) == (
        "The encrypted content for item rs_0000 could not be verified."
    )
    assert answer.json()["error"]["code"] == "invalid_encrypted_content"
    bare = copy.deepcopy(items)
    del bare[1]["encrypted_content"]
    assert error_of(post(server, "responses", request(bare))) == (
        "Item with id 'rs_0000' not found. Items are not persisted when `store` is "
        "set to false. Try again with `store` set to true, or remove this item "
        "from your input."
    )
    assert post(server, "responses", request(bare, store=True)).status_code == 200


def test_every_function_call_is_answered(make_server: MakeServer) -> None:
    server = make_server()
    items = loop(server, 1)
    assert error_of(post(server, "responses", request(items[:3]))) == (
        "No tool output found for function call call_0."
    )
    orphan = [USER, items[3]]
    assert error_of(post(server, "responses", request(orphan))) == (
        "No tool call found for function call output with call_id call_0."
    )


def test_input_before_the_latest_compaction_item_is_not_read(
    make_server: MakeServer,
) -> None:
    server = make_server(limit=16_000)
    items = loop(server, 1)
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
    heavy = {"type": "message", "role": "user", "content": "word " * 20_000}
    after = [heavy, items[1], compaction, USER]  # an over-long, broken past
    assert post(server, "responses", request(after)).status_code == 200
    assert server.exchanges[-1].tokens < 1_000
    assert error_of(post(server, "responses", request([heavy]))) == (
        "This model's maximum context length is 16000 tokens. However, your "
        f"messages resulted in {server.exchanges[-1].tokens} tokens. Please reduce "
        "the length of the messages."
    )


def test_a_reply_past_the_compact_threshold_starts_with_a_compaction_item(
    make_server: MakeServer,
) -> None:
    server = make_server()
    body = request([USER], context_management=[{"compact_threshold": 10}])
    body["context_management"][0]["type"] = "compaction"
    output = post(server, "responses", body).json()["output"]
    assert kinds(output) == ["compaction", "reasoning", "function_call"]
    again = [USER, *output, {"type": "function_call_output", "call_id": "call_0"}]
    again[-1]["output"] = "x"
    assert post(server, "responses", request(again)).status_code == 200


@pytest.mark.parametrize(
    ("tools", "items", "where"),
    [
        ([{**TOOL, "name": "repo.read"}], [USER], "tools[0].name"),
        (
            [TOOL],
            [
                USER,
                {"type": "function_call", "call_id": "c1", "name": "a b"},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ],
            "input[1].name",
        ),
    ],
    ids=["tools", "history"],
)
def test_tool_names(
    make_server: MakeServer, tools: list[Body], items: list[Body], where: str
) -> None:
    server = make_server()
    if len(items) > 1:
        items[1]["arguments"] = "{}"
    body = {"model": "gpt-5-mini", "tools": tools, "input": items}
    assert error_of(post(server, "responses", body)) == (
        f"Invalid '{where}': string does not match pattern. Expected a string that "
        "matches the pattern '^[a-zA-Z0-9_-]+$'."
    )
    long = {**body, "tools": [{**TOOL, "name": "x" * 65}], "input": [USER]}
    assert "string too long" in error_of(post(server, "responses", long))
