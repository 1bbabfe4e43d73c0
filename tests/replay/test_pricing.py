"""Tests for replay._pricing: billed input per provider's cache pricing."""

from __future__ import annotations

import pytest

from langchain_context_guard.replay._pricing import (
    PRICING,
    format_pricing,
    price_prompts,
    price_replay,
)
from tests.replay._support import transcripts

PROMPTS = [[1_000.0, 500.0], [1_000.0, 500.0, 700.0], [1_000.0, 300.0]]
PREFIXES = [0, 2, 1]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Reads 1,500 then 1,000: 0.1 x 2,500 + the rest at list price.
        pytest.param(
            "flat 10%", 1_500 + 0.1 * 1_500 + 700 + 0.1 * 1_000 + 300, id="flat"
        ),
        # OpenAI caches from 1,024 tokens in steps of 128: 1,408 of 1,500.
        pytest.param(
            "openai gpt-4o", 1_500 + 0.5 * 1_408 + 792 + 1_300, id="openai-4o"
        ),
        # Anthropic writes whatever is not read at 1.25x, reads at 0.1x (>= 1,024).
        pytest.param(
            "anthropic",
            1.25 * 1_500 + 0.1 * 1_500 + 1.25 * 700 + 1.25 * 1_300,
            id="anthropic",
        ),
        pytest.param("anthropic, no breakpoints", 1_500 + 2_200 + 1_300, id="uncached"),
    ],
)
def test_price_prompts_follows_each_providers_rules(name: str, expected: float) -> None:
    assert price_prompts(PROMPTS, PREFIXES, PRICING[name]) == pytest.approx(expected)


def test_price_replay_rows_compare_to_sending_everything() -> None:
    rows = price_replay(
        transcripts(2, lines=300), windows=(16_000,), pricing=("flat 10%", "anthropic")
    )
    assert [r["strategy"] for r in rows] == ["none", "guard"]
    none, guard = rows
    assert none["flat 10%"]["vs_none"] == 1.0
    assert guard["input_tokens"] < none["input_tokens"]
    assert 0 < guard["anthropic"]["billed"] < guard["input_tokens"] * 1.25
    table = format_pricing(rows)
    assert "| 16k | guard |" in table and "anthropic" in table
    with pytest.raises(ValueError, match="unknown strategy"):
        price_replay({}, strategies=("nope",))
