"""Every python block in README.md and docs/ (design notes too) runs as written.

New pages under ``docs/`` are picked up on their own; each block runs alone (in a
fresh module, in an empty working directory), so it must be self-contained.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from langchain_context_guard.adapters._deepagents import has_summarizer_hook

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(((?!https?://|#)[^)#\s]+)(?:#[^)]*)?\)")


def _blocks() -> list[tuple[str, str, Path]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for k, match in enumerate(BLOCK.finditer(text)):
            line = text.count("\n", 0, match.start()) + 1
            out.append((f"{page.stem}-{k}-line{line}", match.group(1), page))
    return out


BLOCKS = _blocks()


@pytest.mark.parametrize(
    ("code", "page"), [(c, p) for _, c, p in BLOCKS], ids=[i for i, _, _ in BLOCKS]
)
def test_block_runs(
    code: str, page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "guarded_summarization(" in code and not has_summarizer_hook():
        pytest.skip("guarded_summarization needs deepagents>=0.7.26")
    monkeypatch.chdir(tmp_path)
    # Blocks build real provider clients (as a reader would, with a key set) and
    # never call them; a placeholder key keeps them from depending on this
    # machine's environment or on the order the suite runs in.
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(key, "placeholder-never-sent")
    module = types.ModuleType("docs_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, str(page), "exec"), module.__dict__)


def test_every_page_has_python_blocks_and_readme_stays_short() -> None:
    assert (ROOT / "docs").is_dir()
    names = {p.name for p in PAGES}
    assert {"engine.md", "tokens.md", "configuration.md", "cli.md"} <= names
    with_code = {p.name for _, _, p in BLOCKS}
    assert "README.md" in with_code
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [
        target
        for target in LINK.findall(text)
        if not (page.parent / target).resolve().exists()
    ]
    assert missing == [], f"{page.name} links to missing files: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_design_document_numbers(page: Path) -> None:
    assert not re.search(r"\bseed \d{3}", page.read_text(encoding="utf-8"), re.I)


def test_the_package_names_no_design_document_numbers() -> None:
    package = ROOT / "langchain_context_guard"
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(package.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bseeds? \d{3}", line, re.I)
    ]
    assert found == [], "describe the mechanism instead: " + ", ".join(found)


def test_the_usage_range_in_docs_tokens_is_the_one_applied() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_context_guard import ContextGuard, GuardPolicy
    from langchain_context_guard.engine.tokens._anchor import ANCHOR_RANGE

    text = (ROOT / "docs" / "tokens.md").read_text(encoding="utf-8")
    found = re.search(r"outside (\d\.\d+)-(\d\.\d+) times our own count", text)
    assert found is not None, "docs/tokens.md must state the accepted usage range"
    low, high = float(found.group(1)), float(found.group(2))
    assert (low, high) == ANCHOR_RANGE
    guard = ContextGuard(GuardPolicy(context_window=32_000))
    task = HumanMessage("Why does the build fail? " + "See the log. " * 200)
    plain = AIMessage("Looking.")
    ours = guard.count_tokens([task, plain])
    estimated = guard.count_tokens([task, plain, HumanMessage("And?")])

    def with_usage(ratio: float) -> int:
        prompt = round(ours * ratio)
        usage = {"input_tokens": prompt, "output_tokens": 0, "total_tokens": prompt}
        reply = plain.model_copy(update={"usage_metadata": usage})
        return guard.count_tokens([task, reply, HumanMessage("And?")])

    assert with_usage(high + 0.1) == with_usage(low - 0.1) == estimated  # ignored
    assert with_usage(high - 0.1) > estimated  # believed
