"""Every python block of docs/providers.md and docs/deployment.md runs offline."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
BLOCKS = [
    (f"{page}-{i}", code)
    for page in ("providers.md", "deployment.md")
    for i, code in enumerate(BLOCK.findall((DOCS / page).read_text(encoding="utf-8")))
]


@pytest.mark.parametrize("code", [c for _, c in BLOCKS], ids=[n for n, _ in BLOCKS])
def test_doc_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("doc_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, "doc_block", "exec"), module.__dict__)


def test_each_page_has_python_blocks() -> None:
    assert {n.split("-")[0] for n, _ in BLOCKS} == {"providers.md", "deployment.md"}
