"""The demo's workspace: a generated repository and the ``ls``/``cat``/``grep`` tools.

The repository is a made-up shop backend, written from fixed templates (same files,
same bytes, every run). One bug is planted in ``shopfront/billing/service.py`` and
the logs show its symptom, so the agent has something to find. ``docs/billing.md``,
read early on, states the rounding rule (:data:`FACT`) the answer must quote: the
agent finds it only if the guard still sends that tool output, or if it reads the
file back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool

PACKAGES = ("orders", "inventory", "billing", "shipping", "users", "reports")
MODULES = ("models", "service", "api", "utils")
NOUNS = ("order", "item", "invoice", "parcel", "account", "report", "price", "stock")
VERBS = ("load", "save", "validate", "compute", "format", "merge", "refresh", "sync")
BUG_FILE = "shopfront/billing/service.py"
TASK = (
    "Customers report invoice totals that are off by one cent. Explore the "
    "repository in the current directory with the ls, cat and grep tools, find the "
    "cause, and name the file, the function and the line."
)
MAX_GREP_LINES = 400
FACT_FILE = "docs/billing.md"
FACT = (
    "Invoice totals are rounded half-up to 2 decimals (cents) with "
    "decimal.ROUND_HALF_UP, once, after the discount."
)
"""The line of ``docs/billing.md`` the final answer needs (read in the second call)."""


def _function(pkg: str, mod: str, k: int) -> str:
    verb, noun = VERBS[k % len(VERBS)], NOUNS[(k * 3 + len(pkg)) % len(NOUNS)]
    name = f"{verb}_{noun}_{k}"
    return (
        f"def {name}(records: list[dict[str, object]], *, limit: int = {k + 10}) "
        f"-> list[dict[str, object]]:\n"
        f'    """{verb.capitalize()} up to `limit` {noun} records for {pkg}.{mod}."""\n'
        f"    out: list[dict[str, object]] = []\n"
        f"    for index, record in enumerate(records[:limit]):\n"
        f'        if record.get("{noun}_id") is None:\n'
        f'            log.debug("skipping {noun} without id at %d", index)\n'
        f"            continue\n"
        f'        out.append({{**record, "by": "{pkg}.{mod}", "rank": index}})\n'
        f'    log.info("{name}: %d of %d records", len(out), len(records))\n'
        f"    return out\n"
    )


BUGGY = '''
def apply_discount(subtotal: float, rate: float) -> float:
    """Invoice total after a percentage discount, in currency units."""
    if not 0 <= rate < 1:
        raise ValueError(f"discount rate out of range: {rate}")
    discounted = subtotal * (1 - rate)
    return round(discounted, 1)
'''


def module_text(pkg: str, mod: str) -> str:
    """Source of ``shopfront/<pkg>/<mod>.py``."""
    head = (
        f'"""shopfront.{pkg}.{mod}: {mod} of the {pkg} service."""\n\n'
        "from __future__ import annotations\n\nimport logging\n\n"
        f'log = logging.getLogger("shopfront.{pkg}.{mod}")\n\n'
    )
    count = 18 + (len(pkg) + len(mod)) % 7
    body = "\n\n".join(_function(pkg, mod, k) for k in range(count))
    extra = BUGGY if (pkg, mod) == ("billing", "service") else ""
    return head + body + extra


def log_text(day: int) -> str:
    """``logs/app-<day>.log``: request lines with a few invoice mismatches."""
    lines = []
    for k in range(700):
        pkg = PACKAGES[(k + day) % len(PACKAGES)]
        ms = 3 + (k * 37 + day * 11) % 240
        lines.append(
            f"2024-05-0{day + 1} 10:{k // 60 % 60:02d}:{k % 60:02d} INFO "
            f"shopfront.{pkg}.api request id=r{day}{k:04d} status=200 ms={ms}"
        )
        if k % 97 == 13:
            order = 4000 + day * 100 + k
            lines.append(
                f"2024-05-0{day + 1} 10:{k // 60 % 60:02d}:{k % 60:02d} ERROR "
                f"shopfront.billing.service invoice total mismatch order={order} "
                f"expected={order % 90 + 10}.99 got={order % 90 + 11}.0"
            )
    return "\n".join(lines) + "\n"


def billing_doc() -> str:
    """``docs/billing.md``: how invoices are computed, the rounding rule mid-way."""
    steps = [
        f"{k}. The {noun} step of `shopfront.billing.service` {verb}s the invoice "
        f"{noun} records before the total is computed."
        for k, (verb, noun) in enumerate(zip(VERBS, NOUNS, strict=True), 1)
    ]
    return "\n".join(
        [
            "# Billing",
            "",
            "Invoices are computed by `shopfront.billing.service`.",
            "",
            "## Steps",
            "",
            *steps,
            "",
            "## Rounding",
            "",
            FACT,
            "",
            "## Currencies",
            "",
            *(f"- {c}: amounts in currency units" for c in ("EUR", "USD", "GBP")),
            "",
        ]
    )


def write_repository(root: Path) -> Path:
    """Write the demo repository under ``root``; returns ``root``."""
    files: dict[str, str] = {
        "README.md": "# shopfront\n\nA small shop backend: "
        + ", ".join(PACKAGES)
        + ".\nEach package has models, service, api and utils modules.\n",
        FACT_FILE: billing_doc(),
    }
    for pkg in PACKAGES:
        files[f"shopfront/{pkg}/__init__.py"] = f'"""The {pkg} service."""\n'
        for mod in MODULES:
            files[f"shopfront/{pkg}/{mod}.py"] = module_text(pkg, mod)
        files[f"tests/test_{pkg}.py"] = (
            f"from shopfront.{pkg} import service\n\n\n"
            f"def test_{pkg}_service_imports() -> None:\n"
            f"    assert service.log.name == 'shopfront.{pkg}.service'\n"
        )
    for day in range(4):
        files[f"logs/app-{day}.log"] = log_text(day)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def exploration_plan(steps: int) -> list[tuple[str, dict[str, Any], str]]:
    """``steps`` tool calls as ``(tool, args, thought)``: explore, then pin the bug.

    The second call reads :data:`FACT_FILE` (once: the exploration that follows
    repeats without it), so the answer depends on what the guard kept.
    """
    first: list[tuple[str, dict[str, Any], str]] = [
        ("ls", {"path": "."}, "Let me see what is in the repository."),
        ("cat", {"path": FACT_FILE}, "The billing docs: how are totals rounded?"),
    ]
    explore: list[tuple[str, dict[str, Any], str]] = [
        ("cat", {"path": "README.md"}, "Reading the README."),
        ("ls", {"path": "logs"}, "There are logs; they may show the symptom."),
    ]
    for pkg in PACKAGES:
        explore.append(("ls", {"path": f"shopfront/{pkg}"}, f"Looking at {pkg}."))
        for mod in MODULES:
            path = f"shopfront/{pkg}/{mod}.py"
            explore.append(("cat", {"path": path}, f"Reading {path}."))
        explore.append(
            (
                "grep",
                {"pattern": "round|total", "path": f"shopfront/{pkg}"},
                f"Any rounding in {pkg}?",
            )
        )
    for day in range(4):
        explore.append(("cat", {"path": f"logs/app-{day}.log"}, f"Log of day {day}."))
    explore.append(("grep", {"pattern": "def ", "path": "shopfront"}, "All functions."))
    finish: list[tuple[str, dict[str, Any], str]] = [
        ("grep", {"pattern": "mismatch", "path": "logs"}, "Collecting the errors."),
        (
            "grep",
            {"pattern": r"def apply_discount|round\(", "path": BUG_FILE},
            "Where does billing round?",
        ),
    ]
    if steps <= len(finish):
        return finish[len(finish) - steps :] if steps > 0 else []
    head = steps - len(finish)
    body = first + [explore[k % len(explore)] for k in range(head)]
    return body[:head] + finish


def _inside(root: Path, path: str) -> Path | None:
    target = (root / path).resolve()
    return target if target == root or root in target.parents else None


def make_tools(root: Path) -> list[BaseTool]:
    """``ls``, ``cat`` and ``grep`` over the files under ``root``."""
    root = root.resolve()

    @tool
    def ls(path: str = ".") -> str:
        """List a directory of the repository: one entry per line, with sizes."""
        target = _inside(root, path)
        if target is None or not target.is_dir():
            return f"ls: {path}: not a directory"
        rows = []
        for child in sorted(target.iterdir()):
            size = "-" if child.is_dir() else f"{child.stat().st_size:,}"
            rows.append(
                f"{size:>8}  {child.relative_to(root).as_posix()}"
                + ("/" if child.is_dir() else "")
            )
        return "\n".join(rows) or "(empty)"

    @tool
    def cat(path: str) -> str:
        """Print a whole file of the repository."""
        target = _inside(root, path)
        if target is None or not target.is_file():
            return f"cat: {path}: no such file"
        return target.read_text(encoding="utf-8")

    @tool
    def grep(pattern: str, path: str = ".") -> str:
        """Search files under a path for a regular expression: file:line:text."""
        target = _inside(root, path)
        if target is None or not target.exists():
            return f"grep: {path}: no such file or directory"
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return f"grep: bad pattern {pattern!r}: {exc}"
        files = [target] if target.is_file() else sorted(target.rglob("*"))
        hits = []
        for file in (f for f in files if f.is_file()):
            rel = file.relative_to(root).as_posix()
            for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{rel}:{n}:{line}")
        more = len(hits) - MAX_GREP_LINES
        shown = hits[:MAX_GREP_LINES] + (
            [f"... ({more} more matches)"] if more > 0 else []
        )
        return "\n".join(shown) or "(no matches)"

    return [ls, cat, grep]
