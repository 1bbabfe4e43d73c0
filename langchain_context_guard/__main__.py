"""``context-guard`` / ``python -m langchain_context_guard``: the command line."""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
