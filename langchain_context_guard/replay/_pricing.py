"""Billed input per provider: what prompt caching makes each call's prompt cost.

The replay's flat model bills a prompt's unchanged prefix at ``CACHE_RATE`` (10%)
of the list price. Providers bill differently (``PRICING``, sources in
``docs/providers.md``):

- OpenAI caches automatically: the longest prefix seen before, from 1,024 tokens
  on in steps of 128, is billed at 0.5x (gpt-4o), 0.25x (gpt-4.1, o3, o4-mini)
  or 0.1x (gpt-5); nothing is charged for writing.
- Anthropic caches only up to ``cache_control`` breakpoints: a prefix read back
  bills 0.1x and the tokens written to the cache 1.25x (5-minute entries). With
  the breakpoints ``mark_cache_breakpoints`` sets (the last unchanged message and
  the last message) every call reads the unchanged prefix and writes the rest;
  without breakpoints nothing is cached (the ``anthropic, no breakpoints`` row).

``price_prompts`` prices one conversation's sequence of prompts; ``price_replay``
replays transcripts through the strategies and prices what each one sends, its
summary calls included: each is priced like a call of the conversation, its
prefix read from the cache as far as it matches the prompt sent last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ..engine import REPLY_OVERHEAD, TiktokenCounter
from ._metrics import cached_prefix, message_key
from ._strategies import STRATEGIES, default_reserve, make_strategies
from ._summarizer import PROVIDER


@dataclass(frozen=True)
class CachePricing:
    """How one provider bills cached input, as multiples of the input price."""

    name: str
    read: float
    """Price of a cached token read back."""
    write: float
    """Price of a token written to the cache (1.0: writing costs nothing extra)."""
    minimum: int
    """Shortest prefix (tokens) the provider caches."""
    step: int
    """Cached lengths past ``minimum`` are multiples of this (OpenAI: 128)."""
    breakpoints: bool
    """Caches only at ``cache_control`` breakpoints (Anthropic)."""
    cached: bool = True
    """False for a provider configuration that caches nothing."""


PRICING: dict[str, CachePricing] = {
    p.name: p
    for p in (
        CachePricing("flat 10%", 0.1, 1.0, 0, 1, breakpoints=False),
        CachePricing("openai gpt-4o", 0.5, 1.0, 1_024, 128, breakpoints=False),
        CachePricing("openai gpt-4.1/o3", 0.25, 1.0, 1_024, 128, breakpoints=False),
        CachePricing("openai gpt-5", 0.1, 1.0, 1_024, 128, breakpoints=False),
        CachePricing("anthropic", 0.1, 1.25, 1_024, 1, breakpoints=True),
        CachePricing(
            "anthropic, no breakpoints", 0.1, 1.25, 1_024, 1, True, cached=False
        ),
    )
}
"""Cache pricing by provider and model family (see ``docs/providers.md``)."""


def _cached_tokens(prefix: float, pricing: CachePricing) -> float:
    if prefix < pricing.minimum or prefix <= 0:
        return 0.0
    extra = prefix - pricing.minimum
    return pricing.minimum + extra - extra % pricing.step


def price_prompts(
    prompts: Sequence[Sequence[float]],
    prefixes: Sequence[int],
    pricing: CachePricing,
) -> float:
    """Billed input of one conversation's prompts, in input-token equivalents.

    Args:
        prompts: Each call's per-message token counts, in call order.
        prefixes: Each call's leading messages sent exactly as on the call
            before (0 for the first call).
        pricing: The provider's cache pricing.
    """
    billed = 0.0
    for tokens, prefix in zip(prompts, prefixes, strict=True):
        total = float(sum(tokens))
        if not pricing.cached:
            billed += total
            continue
        read = _cached_tokens(float(sum(tokens[:prefix])), pricing)
        written = (
            total - read if pricing.breakpoints and total >= pricing.minimum else 0
        )
        billed += pricing.read * read + pricing.write * written
        billed += total - read - written
    return billed


@dataclass
class _Priced:
    strategy: str
    window: int
    prompts: list[list[float]]
    prefixes: list[int]


def _calls(messages: list[BaseMessage]) -> list[int]:
    return [k for k, m in enumerate(messages) if isinstance(m, AIMessage)]


def _fed_back(reply: BaseMessage, tokens: int) -> BaseMessage:
    """``reply`` reporting ``tokens`` input tokens, as the provider would have."""
    if not isinstance(reply, AIMessage) or not reply.usage_metadata:
        return reply
    usage: Any = {**reply.usage_metadata, "input_tokens": tokens}
    usage["total_tokens"] = tokens + int(usage.get("output_tokens") or 0)
    meta = {**reply.response_metadata, "prompt_tokens": tokens}
    meta["model_provider"] = PROVIDER
    return reply.model_copy(update={"usage_metadata": usage, "response_metadata": meta})


def price_replay(
    transcripts: dict[str, list[BaseMessage]],
    *,
    windows: Sequence[int] = (16_000, 32_000),
    strategies: Sequence[str] = ("none", "guard"),
    pricing: Sequence[str] = tuple(PRICING),
) -> list[dict[str, Any]]:
    """Replay each transcript call by call and price what each strategy sends.

    Every call's history is the transcript up to that reply; tokens are
    tiktoken's (the ratios between strategies are what a price table shows).
    Returns one row per (window, strategy): the input tokens sent (summary
    calls included) and, per
    pricing, the billed input and its ratio to sending the whole history
    (``none``) under the same pricing.
    """
    for name in strategies:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r}; expected one of {STRATEGIES}")
    counter = TiktokenCounter()
    sizes: dict[tuple[str, ...], float] = {}

    def size(m: BaseMessage) -> tuple[float, tuple[str, ...]]:
        key = message_key(m)
        if key not in sizes:
            sizes[key] = float(counter.count_message(m))
        return sizes[key], key

    priced: list[list[_Priced]] = []
    names = ["none", *[s for s in strategies if s != "none"]]
    for window in windows:
        built = make_strategies(names, window, default_reserve(window), counter=counter)
        runs = [_Priced(s.name, window, [], []) for s in built]
        for messages in transcripts.values():
            for strategy, run in zip(built, runs, strict=True):
                strategy.start()
                previous: list[tuple[str, ...]] = []
                lived = list(messages)
                for k in _calls(messages):
                    sent, summaries, _ = strategy.prompt(lived[:k])
                    for call in summaries:
                        asked = [size(m) for m in call.prompt]
                        run.prompts.append(
                            [*(t for t, _ in asked), float(REPLY_OVERHEAD)]
                        )
                        keys = [key for _, key in asked]
                        run.prefixes.append(cached_prefix(previous, keys))
                    measured = [size(m) for m in sent]
                    lived[k] = _fed_back(
                        messages[k],
                        _provider_size(messages, k, sum(t for t, _ in measured), size),
                    )
                    keys = [key for _, key in measured]
                    run.prompts.append(
                        [*(t for t, _ in measured), float(REPLY_OVERHEAD)]
                    )
                    run.prefixes.append(cached_prefix(previous, keys))
                    previous = keys
        priced.append(runs)
    return [_row(run, runs[0], pricing) for runs in priced for run in runs]


def _provider_size(
    messages: list[BaseMessage],
    k: int,
    sent: float,
    size: Any,
) -> int:
    """``sent`` tiktoken tokens scaled to the provider's count of call ``k``."""
    provider = messages[k].response_metadata.get("prompt_tokens")
    whole = sum(size(m)[0] for m in messages[:k]) + REPLY_OVERHEAD
    scale = provider / whole if isinstance(provider, int) and provider > 0 else 1.0
    return round(scale * (sent + REPLY_OVERHEAD))


def _row(run: _Priced, none: _Priced, pricing: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "window": run.window,
        "strategy": run.strategy,
        "input_tokens": round(sum(map(sum, run.prompts))),
    }
    for name in pricing:
        cost = price_prompts(run.prompts, run.prefixes, PRICING[name])
        base = price_prompts(none.prompts, none.prefixes, PRICING[name])
        row[name] = {"billed": round(cost), "vs_none": round(cost / base, 4)}
    return row


def format_pricing(rows: list[dict[str, Any]]) -> str:
    """The priced rows as a markdown table: billed input (M) and ratio to none."""
    names = [k for k in rows[0] if isinstance(rows[0][k], dict)] if rows else []
    head = "| window | strategy | input tok | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for r in rows:
        cells = [
            f"{r['window'] // 1000}k",
            r["strategy"],
            f"{r['input_tokens'] / 1e6:.2f}M",
        ]
        cells += [
            f"{r[n]['billed'] / 1e6:.2f}M ({r[n]['vs_none']:.2f}x)" for n in names
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
