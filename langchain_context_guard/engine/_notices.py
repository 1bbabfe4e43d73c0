"""What a guard says once, not on every call: a small window, a reply without usage."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ._events import GuardEvent, log_event
from ._policy import GuardPolicy
from ._window import WindowInfo, window_warning
from .tokens._anchor import warn_missing_usage


class Notices:
    """A guard's record of what it has already said (safe across threads)."""

    def __init__(self, policy: GuardPolicy) -> None:
        """Nothing said yet, under ``policy``'s thresholds."""
        self.policy = policy
        self._lock = threading.Lock()
        self._windows: set[tuple[str, int]] = set()
        self._usage = False

    def due(
        self,
        info: WindowInfo,
        budget: int,
        name: str,
        model: Any,
        messages: Sequence[BaseMessage],
        seen: int | None,
    ) -> list[GuardEvent]:
        """This call's ``window_warning`` event, if it is due.

        It is, and is logged, the first time model ``name`` has this small
        window. A ``UsageMissingWarning`` is raised the first time a reply after
        the ``seen`` first messages came back from a stream without usage
        (``_anchor.warn_missing_usage``).
        """
        if not self._usage and self.policy.usage_anchoring:
            self._usage = warn_missing_usage(messages, seen or 0, model)
        key = (name, info.tokens)
        with self._lock:
            if not info.should_warn or key in self._windows:
                return []
            self._windows.add(key)
        event = window_warning(info, budget, self.policy.warn_below_tokens)
        log_event(event)
        return [event]
