"""Anthropic's extended-thinking rules, and the thinking blocks the stand-in signs.

Thinking is on when the request's ``thinking.type`` is ``enabled`` or
``adaptive`` (binding models think always). Where each rule comes from:

- The final-turn rule: when thinking is on, the assistant message whose
  ``tool_use`` blocks the trailing ``tool_result`` blocks answer (a running tool
  loop) starts with ``thinking`` or ``redacted_thinking``. The error text is the
  API's, as reported in public issue trackers; rule and wording:
  https://docs.claude.com/en/docs/build-with-claude/extended-thinking
- Thinking first [inferred]: an assistant message holding thinking has it before
  its text and ``tool_use`` blocks (a ``compaction`` block may lead). The docs
  show replies in that order; the error wording is ours.
- The final block of an assistant message is not ``thinking``: the API's text,
  as reported in public issue trackers ("The final block in an assistant message
  cannot be `thinking`.").
- Signatures: a thinking block of the latest assistant message (of every
  assistant message, for a binding model) must carry the signature the server
  gave that exact text ("Invalid `signature` in `thinking` block", the API's
  text). The stand-in signs a block with an HMAC of its text (and, for a binding
  model, of its prefix) and a secret of its own; ``redacted_thinking`` blocks,
  which it never issues, are not checked.
- Forced tool use: with thinking on, ``tool_choice`` may only be ``auto`` or
  ``none`` ("Tool use with thinking" in the extended-thinking docs above); the
  API's text, as reported in public issue trackers: "Thinking may not be enabled
  when tool_choice forces tool use."
- Thinking off: the API's text, as reported in public issue trackers: "When
  thinking is disabled, an `assistant` message in the final position cannot
  contain `thinking`." The final position is the request's last message.
- Binding models (``claude-fable-5-1``, dated ids too; not Mythos 5.1, which
  "doesn't run this check", and not Opus 5): every signed block is bound to the
  prefix it was produced behind: ``system``, ``tools``, the messages before the
  reply and the blocks before it in the reply, without ``cache_control`` marks.
  https://platform.claude.com/docs/en/models/fable-5-1/whats-new-fable-5-1
  "Removing a leading run of thinking blocks (oldest first)" keeps later blocks
  valid, and so does server-side compaction (the prefix is read from the latest
  ``compaction`` block on). A replayed block whose prefix differs is refused,
  unless the request sets ``thinking.block_binding.prefix_mismatch_behavior`` to
  ``"drop_block"`` with the ``thinking-binding-controls-2026-08-01`` beta: then
  the stale blocks are dropped with the rest of their run of consecutive thinking
  blocks, reported in ``input_transformations`` (``[]`` when nothing is dropped,
  on every reply to a request with that beta, as the SDK's ``BetaMessage``
  documents) and not counted. The stand-in enforces the check as for an account
  created after 2026-08-31 (no ``thinking_mismatch_allowed`` entries). Our
  reading of "to drop the block and continue instead": the
  final-turn rule holds the request as it was sent, so a block the server drops
  itself never makes the request fail that rule. The prefix a block binds to is
  the request as sent [inferred].
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ._rules import Body, Refusal, _anthropic_error, _blocks

BINDING_BETA = "thinking-binding-controls-2026-08-01"
THINKING = frozenset({"thinking", "redacted_thinking"})
_BINDING_MODEL = re.compile(r"^claude-fable-5-1(?:-\d{8})?$")
Token = tuple[str, str]
"""One item of a canonical prefix: its kind (``role``, a block type, ``head``)
and a digest of its JSON."""


def binds(model: str) -> bool:
    """Whether ``model`` binds its thinking blocks to their prefix."""
    return bool(_BINDING_MODEL.match(model))


def thinking_on(body: Body) -> bool:
    """The request asks for thinking (a binding model always thinks)."""
    kind = (body.get("thinking") or {}).get("type")
    return kind in {"enabled", "adaptive"} or binds(str(body.get("model", "")))


def drops_stale(body: Body, betas: str) -> bool:
    """The request asks to drop stale blocks instead of failing."""
    binding = (body.get("thinking") or {}).get("block_binding") or {}
    return binding.get(
        "prefix_mismatch_behavior"
    ) == "drop_block" and BINDING_BETA in betas.split(",")


# -- canonical prefixes ---------------------------------------------------------


def _canonical_block(block: Body) -> Body:
    """The fields of a block that the model sees (no marks, no client extras)."""
    kind = block.get("type")
    keep = {
        "text": ("text",),
        "thinking": ("thinking", "signature"),
        "redacted_thinking": ("data",),
        "tool_use": ("id", "name", "input"),
        "compaction": ("content",),
    }.get(str(kind))
    if keep is not None:
        return {"type": kind, **{k: block.get(k) for k in keep}}
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return {
            "type": kind,
            "tool_use_id": block.get("tool_use_id"),
            "content": [_canonical_block(b) for b in content or []],
            "is_error": bool(block.get("is_error")),
        }
    return {k: v for k, v in block.items() if k != "cache_control"}


def _dump(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def head_tokens(body: Body) -> list[Token]:
    """``system`` and ``tools`` as prefix items."""
    system = body.get("system")
    blocks = _blocks({"content": system}) if system else []
    tools = [
        {k: v for k, v in t.items() if k != "cache_control"}
        for t in body.get("tools") or []
    ]
    return [("head", _dump([[_canonical_block(b) for b in blocks], tools]))]


def message_tokens(message: Body) -> list[Token]:
    """A message as prefix items: its role, then its blocks."""
    blocks = [_canonical_block(b) for b in _blocks(message)]
    return [("role", str(message.get("role")))] + [
        (str(b.get("type")), _dump(b)) for b in blocks
    ]


def from_compaction(tokens: list[Token]) -> list[Token]:
    """The head, then everything from the latest ``compaction`` block on."""
    cut = max((i for i, t in enumerate(tokens) if t[0] == "compaction"), default=0)
    return tokens[:1] + tokens[cut:] if cut else tokens


class Prefixes:
    """The canonical prefix of every block of one request, read once."""

    def __init__(self, body: Body) -> None:
        self.flat = head_tokens(body)
        self.starts: list[int] = []
        for m in body["messages"]:
            self.starts.append(len(self.flat))
            self.flat += message_tokens(m)

    def of(self, i: int, j: int) -> list[Token]:
        """The prefix block ``j`` of message ``i`` stands behind."""
        return from_compaction(self.flat[: self.starts[i] + 1 + j])


def same_prefix(issued: list[Token], sent: list[Token]) -> bool:
    """``sent`` is ``issued``, or ``issued`` less a leading run of thinking blocks."""
    removed = len(issued) - len(sent)
    if removed < 0:
        return False
    thinking = [i for i, t in enumerate(issued) if t[0] in THINKING]
    if removed > len(thinking):
        return False
    gone = set(thinking[:removed])
    return [t for i, t in enumerate(issued) if i not in gone] == sent


# -- the ledger of signed blocks ------------------------------------------------


@dataclass(frozen=True)
class Issued:
    """A thinking block the server produced: its text and the prefix it stood behind."""

    thinking: str
    prefix: list[Token]


@dataclass
class Ledger:
    """The thinking blocks one server signed."""

    secret: bytes = b"stand-in thinking key"
    issued: dict[str, Issued] = field(default_factory=dict)

    def sign(self, thinking: str, prefix: list[Token], model: str) -> str:
        """A signature for ``thinking`` (bound to ``prefix`` for a binding model)."""
        bound = _dump(prefix) if binds(model) else ""
        digest = hmac.new(self.secret, (thinking + bound).encode(), hashlib.sha256)
        signature = base64.b64encode(digest.digest()).decode()
        self.issued[signature] = Issued(thinking, prefix)
        return signature


@dataclass(frozen=True)
class Stale:
    """A block a binding model dropped: where it was, and why."""

    message: int
    block: int

    def report(self) -> Body:
        """Its entry in ``input_transformations`` (the SDK's
        ``BetaThinkingDroppedInputTransformation``)."""
        return {
            "type": "thinking_dropped",
            "reason": "prefix_binding_mismatch",
            "path": f"messages.{self.message}.content.{self.block}",
        }


def _final_turn(messages: list[Body]) -> Refusal | None:
    """A running tool loop's assistant message starts with thinking."""
    if len(messages) < 2 or messages[-2].get("role") != "assistant":
        return None
    results = {
        b.get("tool_use_id")
        for b in _blocks(messages[-1])
        if b.get("type") == "tool_result"
    }
    turn = [b for b in _blocks(messages[-2]) if b.get("type") != "compaction"]
    uses = {b.get("id") for b in turn if b.get("type") == "tool_use"}
    if not uses & results or turn[0].get("type") in THINKING:
        return None
    i, found = len(messages) - 2, turn[0].get("type")
    return _anthropic_error(
        f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
        f"but found `{found}`. When `thinking` is enabled, a final `assistant` "
        "message must start with a thinking block (preceding the lastmost set of "
        "`tool_use` and `tool_result` blocks). We recommend you include thinking "
        "blocks from previous turns. To avoid this requirement, disable "
        "`thinking`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    )


def _shape(i: int, message: Body) -> Refusal | None:
    """Thinking first, and not last, in an assistant message."""
    blocks = _blocks(message)
    other = False
    for j, b in enumerate(blocks):
        kind = b.get("type")
        if kind in THINKING and other:
            return _anthropic_error(
                f"messages.{i}.content.{j}: `thinking` and `redacted_thinking` "
                "blocks must come before any other block in an `assistant` message"
            )
        other = other or kind not in THINKING | {"compaction"}
    if blocks and blocks[-1].get("type") in THINKING:
        return _anthropic_error(
            f"messages.{i}: The final block in an assistant message cannot be "
            "`thinking`."
        )
    return None


def _forced_tool(body: Body) -> Refusal | None:
    if (body.get("tool_choice") or {}).get("type") in {"any", "tool"}:
        return _anthropic_error(
            "Thinking may not be enabled when tool_choice forces tool use."
        )
    return None


def thinking_violation(
    body: Body, betas: str, ledger: Ledger
) -> Refusal | list[Stale] | None:
    """The first thinking rule ``body`` breaks, else the blocks to drop (if any)."""
    messages = body["messages"]
    assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    for i in assistant:
        broken = _shape(i, messages[i])
        if broken is not None:
            return broken
    if not thinking_on(body):
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant" and any(
            b.get("type") in THINKING for b in _blocks(last)
        ):
            return _anthropic_error(
                "When thinking is disabled, an `assistant` message in the final "
                "position cannot contain `thinking`. To use thinking blocks, enable "
                "`thinking` in your request."
            )
        return None
    broken = _forced_tool(body) or _final_turn(messages)
    if broken is not None:
        return broken
    model = str(body.get("model", ""))
    start = max(
        (
            i
            for i, m in enumerate(messages)
            for b in _blocks(m)
            if b.get("type") == "compaction"
        ),
        default=0,
    )
    checked = [i for i in assistant if i >= start] if binds(model) else assistant[-1:]
    stale: list[Stale] = []
    prefixes = Prefixes(body) if binds(model) else None
    for i in checked:
        for j, b in enumerate(_blocks(messages[i])):
            if b.get("type") != "thinking":
                continue
            issued = ledger.issued.get(str(b.get("signature")))
            if issued is None or issued.thinking != b.get("thinking"):
                return _anthropic_error(
                    f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                )
            if prefixes and not same_prefix(issued.prefix, prefixes.of(i, j)):
                stale += _with_its_run(messages[i], i, j, stale)
    if stale and not drops_stale(body, betas):
        first = stale[0]
        return _anthropic_error(
            f"messages.{first.message}.content.{first.block}: Invalid `signature` in "
            "`thinking` block. The block is bound to a different conversation. "
            "Remove the block, or set "
            '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block". '
            f"That setting requires the `{BINDING_BETA}` value in the "
            "`anthropic-beta` header."
        )
    return stale


def _with_its_run(message: Body, i: int, j: int, stale: list[Stale]) -> list[Stale]:
    """Block ``j`` and the rest of its run of consecutive thinking blocks."""
    run: list[Stale] = []
    blocks = _blocks(message)
    while j < len(blocks) and blocks[j].get("type") in THINKING:
        if Stale(i, j) not in stale:
            run.append(Stale(i, j))
        j += 1
    return run


def without(body: Body, stale: list[Stale]) -> Body:
    """``body`` less the dropped blocks (what the model reads and is billed for)."""
    gone = {(s.message, s.block) for s in stale}
    messages = [
        {**m, "content": [b for j, b in enumerate(_blocks(m)) if (i, j) not in gone]}
        if any(s.message == i for s in stale)
        else m
        for i, m in enumerate(body["messages"])
    ]
    return {**body, "messages": messages}
