"""Shared fixtures: offline tokenizer, message builders, the shared trajectories."""

from __future__ import annotations

import os

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
