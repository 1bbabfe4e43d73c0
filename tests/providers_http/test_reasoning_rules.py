"""The stand-ins refuse what the providers refuse about reasoning, as they do.

One test per rule: a hand-built request that breaks it gets the provider's
status and error text, and the same request made valid is answered. The
signed blocks, items and signatures come from the server's own earlier replies.
Each rule's source is in the docstring of the module that enforces it
(``_rules_anthropic``, ``_rules_responses``, ``_rules_gemini``, ``_rules_names``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ._reasoning import Body, error_of, post
from ._rules_anthropic import BINDING_BETA
from ._server import ProviderServer

MakeServer = Callable[..., ProviderServer]
TOOL = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
ON = {"type": "enabled", "budget_tokens": 1024}


# -- Anthropic ------------------------------------------------------------------


def claude(messages: list[Body], model: str = "claude-sonnet-4-6", **more: Any) -> Body:
    """A Messages request with thinking on and one tool."""
    body = {"model": model, "max_tokens": 4096, "thinking": ON, "tools": [TOOL]}
    return {**body, "messages": messages, **more}


def results(reply: Body) -> Body:
    """The user turn answering ``reply``'s ``tool_use`` blocks."""
    uses = [b["id"] for b in reply["content"] if b["type"] == "tool_use"]
    content = [
        {"type": "tool_result", "tool_use_id": u, "content": f"text of {u}"}
        for u in uses
    ]
    return {"role": "user", "content": content}


def loop(
    server: ProviderServer, steps: int, model: str = "claude-sonnet-4-6", **more: Any
) -> list[Body]:
    """A tool loop of ``steps`` replies, each sent back as it came."""
    messages: list[Body] = [{"role": "user", "content": "Find the checksum bug."}]
    for _ in range(steps):
        answer = post(server, "anthropic", claude(messages, model, **more))
        assert answer.status_code == 200, answer.text
        reply = {"role": "assistant", "content": answer.json()["content"]}
        messages += [reply, results(reply)]
    return messages


def test_anthropic_replies_carry_signed_thinking(make_server: MakeServer) -> None:
    server = make_server()
    messages = loop(server, 1)
    kinds = [b["type"] for b in messages[1]["content"]]
    assert kinds == ["thinking", "text", "tool_use"]
    assert messages[1]["content"][0]["signature"]
    off = post(server, "anthropic", {**claude(messages[:1]), "thinking": None})
    assert [b["type"] for b in off.json()["content"]] == ["text", "tool_use"]


@pytest.mark.parametrize(
    "choice", [{"type": "any"}, {"type": "tool", "name": "read_file"}]
)
def test_anthropic_thinking_refuses_a_forced_tool_choice(
    make_server: MakeServer, choice: Body
) -> None:
    server = make_server()
    task = [{"role": "user", "content": "Find the checksum bug."}]
    forced = post(server, "anthropic", claude(task, tool_choice=choice))
    assert error_of(forced) == (
        "Thinking may not be enabled when tool_choice forces tool use."
    )
    auto = post(server, "anthropic", claude(task, tool_choice={"type": "auto"}))
    assert auto.status_code == 200, auto.text
    off = post(
        server, "anthropic", {**claude(task, tool_choice=choice), "thinking": None}
    )
    assert off.status_code == 200, off.text


@pytest.mark.parametrize(("first", "keep"), [("text", 1), ("tool_use", 2)])
def test_anthropic_a_running_tool_turn_starts_with_thinking(
    make_server: MakeServer, first: str, keep: int
) -> None:
    server = make_server()
    messages = loop(server, 1)
    assert post(server, "anthropic", claude(messages)).status_code == 200
    broken = copy.deepcopy(messages)
    broken[1]["content"] = broken[1]["content"][keep:]
    assert error_of(post(server, "anthropic", claude(broken))) == (
        f"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, "
        f"but found `{first}`. When `thinking` is enabled, a final `assistant` "
        "message must start with a thinking block (preceding the lastmost set of "
        "`tool_use` and `tool_result` blocks). We recommend you include thinking "
        "blocks from previous turns. To avoid this requirement, disable "
        "`thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )
    # An earlier tool turn without its thinking is not the running one.
    closed = [*broken, {"role": "assistant", "content": "Done."}]
    closed.append({"role": "user", "content": "Thanks."})
    assert post(server, "anthropic", claude(closed)).status_code == 200


def test_anthropic_thinking_comes_first_in_its_message(make_server: MakeServer) -> None:
    server = make_server()
    messages = loop(server, 1)
    broken = copy.deepcopy(messages)
    thought, text, use = broken[1]["content"]
    broken[1]["content"] = [text, thought, use]
    assert error_of(post(server, "anthropic", claude(broken))) == (
        "messages.1.content.1: `thinking` and `redacted_thinking` blocks must come "
        "before any other block in an `assistant` message"
    )


def test_anthropic_an_assistant_message_does_not_end_on_thinking(
    make_server: MakeServer,
) -> None:
    server = make_server()
    messages = loop(server, 1)
    thought = messages[1]["content"][0]
    broken = [
        messages[0],
        {"role": "assistant", "content": [thought]},
        {"role": "user", "content": "Go on."},
    ]
    assert error_of(post(server, "anthropic", claude(broken))) == (
        "messages.1: The final block in an assistant message cannot be `thinking`."
    )


@pytest.mark.parametrize("change", ["text", "signature"])
def test_anthropic_a_thinking_block_keeps_its_signature(
    make_server: MakeServer, change: str
) -> None:
    server = make_server()
    messages = loop(server, 1)
    broken = copy.deepcopy(messages)
    block = broken[1]["content"][0]
    block[{"text": "thinking", "signature": "signature"}[change]] += "x"
    assert error_of(post(server, "anthropic", claude(broken))) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    )


def test_anthropic_thinking_off_refuses_thinking_in_the_final_position(
    make_server: MakeServer,
) -> None:
    server = make_server()
    messages = loop(server, 1)
    prefill = [
        messages[0],
        {"role": "assistant", "content": messages[1]["content"][:2]},
    ]
    off = {**claude(prefill), "thinking": {"type": "disabled"}}
    assert error_of(post(server, "anthropic", off)) == (
        "When thinking is disabled, an `assistant` message in the final position "
        "cannot contain `thinking`. To use thinking blocks, enable `thinking` in "
        "your request."
    )
    earlier = {**off, "messages": messages}
    assert post(server, "anthropic", earlier).status_code == 200


BOUND = (
    "messages.1.content.0: Invalid `signature` in `thinking` block. The block is "
    "bound to a different conversation. Remove the block, or set "
    '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That '
    f"setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."
)
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}


def _edited(messages: list[Body]) -> list[Body]:
    """``messages`` with the first tool result rewritten (a prefix edit)."""
    edited = copy.deepcopy(messages)
    edited[2]["content"][0]["content"] = "[truncated]"
    return edited


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-fable-5-1-20260815"])
def test_anthropic_a_binding_model_refuses_a_block_behind_another_prefix(
    make_server: MakeServer, model: str
) -> None:
    server = make_server()
    messages = loop(server, 2, model)
    assert post(server, "anthropic", claude(messages, model)).status_code == 200
    stale = claude(_edited(messages), model)
    assert error_of(post(server, "anthropic", stale)) == BOUND.replace(
        "messages.1.", "messages.3."
    )
    cached = copy.deepcopy(messages)
    cached[2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert post(server, "anthropic", claude(cached, model)).status_code == 200


@pytest.mark.parametrize("model", ["claude-mythos-5-1", "claude-opus-5"])
def test_anthropic_other_models_do_not_bind(
    make_server: MakeServer, model: str
) -> None:
    server = make_server()
    messages = loop(server, 2, model)
    assert (
        post(server, "anthropic", claude(_edited(messages), model)).status_code == 200
    )


def test_anthropic_a_leading_run_of_thinking_can_go(make_server: MakeServer) -> None:
    server = make_server()
    model = "claude-fable-5-1"
    messages = loop(server, 3, model)
    oldest = copy.deepcopy(messages)
    del oldest[1]["content"][0]
    assert post(server, "anthropic", claude(oldest, model)).status_code == 200
    middle = copy.deepcopy(messages)
    del middle[3]["content"][0]
    assert error_of(post(server, "anthropic", claude(middle, model))) == (
        BOUND.replace("messages.1.", "messages.5.")
    )


def test_anthropic_drop_block_drops_stale_blocks_and_reports_them(
    make_server: MakeServer,
) -> None:
    server = make_server()
    model = "claude-fable-5-1"
    messages = loop(server, 2, model)
    stale = claude(_edited(messages), model, thinking=DROP)
    assert error_of(post(server, "anthropic", stale)) == BOUND.replace(
        "messages.1.", "messages.3."
    )  # the setting without its beta header
    answer = post(server, "anthropic", stale, betas=BINDING_BETA)
    assert answer.status_code == 200, answer.text
    assert answer.json()["input_transformations"] == [
        {
            "type": "thinking_dropped",
            "reason": "prefix_binding_mismatch",
            "path": "messages.3.content.0",
        }
    ]
    refused, dropped = server.exchanges[-2:]
    assert dropped.dropped and not refused.dropped
    assert dropped.tokens < refused.tokens  # a dropped block is not counted
    fresh = post(server, "anthropic", claude(messages, model), betas=BINDING_BETA)
    assert fresh.json()["input_transformations"] == []
    # The client removing that block itself breaks the final-turn rule.
    removed = claude(_edited(messages), model, thinking=DROP)
    del removed["messages"][3]["content"][0]
    assert "but found `text`" in error_of(
        post(server, "anthropic", removed, betas=BINDING_BETA)
    )


@pytest.mark.parametrize(
    ("tools", "messages", "expected"),
    [
        (
            [{**TOOL, "name": "repo.read"}],
            [{"role": "user", "content": "hi"}],
            "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
        ),
        (
            [TOOL],
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "a:b", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "x"}
                    ],
                },
            ],
            "messages.1.content.0.tool_use.name: String should match pattern "
            "'^[a-zA-Z0-9_-]{1,128}$'",
        ),
    ],
    ids=["tools", "history"],
)
def test_anthropic_tool_names(
    make_server: MakeServer, tools: list[Body], messages: list[Body], expected: str
) -> None:
    server = make_server()
    body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "tools": tools}
    assert error_of(post(server, "anthropic", {**body, "messages": messages})) == (
        expected
    )
    fine = {**body, "tools": [{**TOOL, "name": "x" * 128}], "messages": messages[:1]}
    assert post(server, "anthropic", fine).status_code == 200
