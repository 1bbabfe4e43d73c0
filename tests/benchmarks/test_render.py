"""BENCHMARKS.md is what ``benchmarks/render.py`` makes of the stored results."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import render


def test_benchmarks_md_is_rendered_from_the_results() -> None:
    assert render.main(["--check"]) == 0


def test_every_table_names_the_command_that_reproduces_it() -> None:
    text = render.render()
    sections = text.split("\n## ")[1:]
    assert len(sections) >= 8
    for section in sections:
        assert "```bash\n" in section, section.splitlines()[0]
    assert len(text.splitlines()) <= 420  # a page a reader still takes in
