"""Every python block of docs/langchain.md runs, offline, as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "langchain.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block-{i}" for i in range(len(BLOCKS))])
def test_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    module = types.ModuleType("langchain_doc_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, str(DOC), "exec"), module.__dict__)


def test_doc_has_blocks() -> None:
    assert len(BLOCKS) >= 5
