"""Every notebook runs, offline, and prints exactly what its stored outputs show.

Regenerate the stored outputs after a change (executes each notebook in place):

    python tests/test_notebooks.py [notebooks/NAME.ipynb ...]
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from langchain_context_guard.replay._transcripts import shared_trajectory_dir

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NEEDS_DATA = {"03_replay_analysis.ipynb"}
TEXT_TYPES = ("text/plain", "text/markdown")


async def execute(path: Path) -> Any:
    """Run a notebook with the ``python3`` kernel; stream outputs coalesced."""
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(path.parent)}},
    )
    await client.async_execute()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        merged: list[Any] = []
        for out in cell.outputs:
            last = merged[-1] if merged else None
            if (
                last is not None
                and out.output_type == last.output_type == "stream"
                and out.name == last.name
            ):
                last.text += out.text
            else:
                merged.append(out)
        cell.outputs = merged
    return nb


def text_outputs(nb: Any) -> list[list[tuple[str, str]]]:
    """What each code cell printed or returned, as text (images left out)."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        shown: list[tuple[str, str]] = []
        for out in cell.outputs:
            if out.output_type == "stream":
                shown.append((out.name, out.text))
            elif out.output_type == "error":
                shown.append(("error", f"{out.ename}: {out.evalue}"))
            else:
                data = out.get("data", {})
                shown += [(k, data[k]) for k in TEXT_TYPES if k in data]
        cells.append(shown)
    return cells


def runnable() -> list[Path]:
    """The notebooks this machine can run (the replay needs the shared data)."""
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if shared_trajectory_dir() is None:
        paths = [p for p in paths if p.name not in NEEDS_DATA]
    return paths


@pytest.fixture(scope="module")
def executed() -> dict[str, Any]:
    """Every runnable notebook, executed side by side (kernels start in parallel)."""
    paths = runnable()

    async def run_all() -> list[Any]:
        return await asyncio.gather(*(execute(p) for p in paths))

    return dict(zip([p.name for p in paths], asyncio.run(run_all()), strict=True))


@pytest.mark.parametrize(
    "name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")), ids=lambda n: n[:2]
)
def test_notebook_runs_and_matches_its_stored_outputs(
    name: str, executed: dict[str, Any]
) -> None:
    if name not in executed:
        pytest.skip("shared trajectories are not available")
    stored = nbformat.read(NOTEBOOKS / name, as_version=4)
    fresh = executed[name]
    assert text_outputs(fresh) == text_outputs(stored), (
        f"{name}: outputs changed; regenerate with python tests/test_notebooks.py"
    )
    printed = "".join(text for cell in text_outputs(fresh) for _, text in cell)
    assert str(Path.home()) not in printed
    assert str(NOTEBOOKS.parent) not in printed


def test_every_notebook_is_stored_with_outputs() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == [
        "01_quickstart.ipynb",
        "02_langgraph_agent.ipynb",
        "03_replay_analysis.ipynb",
    ]
    for name in names:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs for c in code[1:]), f"{name}: a cell has no output"
        assert nb.metadata["kernelspec"]["name"] == "python3"
        last = nb.cells[-1]
        assert last.cell_type == "markdown", f"{name}: ends with a code cell"
        assert last.source.startswith("## What to take away"), name


if __name__ == "__main__":
    for arg in sys.argv[1:] or sorted(NOTEBOOKS.glob("*.ipynb")):
        target = Path(arg)
        nbformat.write(asyncio.run(execute(target)), target)
        print(f"executed and stored {target}")
