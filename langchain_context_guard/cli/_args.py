"""Command-line argument types shared by ``replay`` and the other commands.

Each raises ``argparse.ArgumentTypeError`` naming the value and the fix, so a
bad flag ends in argparse's one-line error (exit 2), never in a traceback.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NoReturn


def window_arg(text: str) -> int:
    """Tokens as ``32000`` or ``32k``."""
    text = text.strip().lower()
    scale = 1_000 if text.endswith("k") else 1
    try:
        value = int(float(text.removesuffix("k")) * scale)
    except (ValueError, OverflowError):  # not a number; inf, nan or past float
        raise argparse.ArgumentTypeError(
            f"invalid window {text!r}; expected tokens like 32000 or 32k"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"window must be positive, got {text!r}")
    return value


def positive_arg(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def output_arg(text: str) -> Path:
    """A file the command may write: its folder exists and is writable.

    Missing folders are not created: a typo in a path should not leave new
    directories behind.
    """
    path = Path(text).expanduser()
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a folder; give a file path inside it"
        )
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(
            f"folder {folder} does not exist; create it first or choose another path"
        )
    if not os.access(folder, os.W_OK) or (
        path.exists() and not os.access(path, os.W_OK)
    ):
        raise argparse.ArgumentTypeError(
            f"cannot write {path} (permission denied); choose another path"
        )
    return path


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (exit 2), without the usage."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
