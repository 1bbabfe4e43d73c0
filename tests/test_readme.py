"""Every python block in README.md runs, offline, as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    out = []
    for match in BLOCK.finditer(text):
        heading = [h for h in re.findall(r"^#+ (.+)$", text[: match.start()], re.M)]
        out.append((heading[-1] if heading else "top", match.group(1)))
    return out


@pytest.mark.parametrize(
    "code",
    [c for _, c in _blocks()],
    ids=[f"{i}-{h}" for i, (h, _) in enumerate(_blocks())],
)
def test_readme_block_runs(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("readme_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, str(README), "exec"), module.__dict__)


def test_readme_has_python_blocks() -> None:
    assert len(_blocks()) >= 1
