"""How a replay shows its progress, and keeps the guard's log quiet meanwhile."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Progress:
    """tqdm when installed, else a counter on stderr; silent when disabled."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.bar: Any = None
        if enabled:
            try:
                from tqdm import tqdm  # type: ignore[import-untyped]

                self.bar = tqdm(total=total, unit="call", desc="replay")
            except ImportError:
                pass

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled:
            pct = 100 * self.done // max(self.total, 1)
            sys.stderr.write(f"\rreplay: {self.done:,}/{self.total:,} calls ({pct}%)")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")


@contextmanager
def quiet_guard_log() -> Iterator[None]:
    """The guard logs every lossy event; a replay makes thousands of them."""
    logger = logging.getLogger("langchain_context_guard")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
