"""How well three estimates of a history's growth per call predict the next cycle.

The cost model (``engine.incremental._cost_model``) prunes to a share of the budget
that depends on ``g``, the tokens the prompt grows by per model call until the next
pruning. At every call of the shared transcripts where the history as sent is over
the budget (where a pruning can happen), the actual ``g`` of the coming cycle (the
next ``(1 - prune_to)`` of the budget of messages, over the assistant messages among
them, each message as the prompt holds it: through the truncation pass) is compared
with three estimates from the history so far:

* ``as written``: the history's own tokens over its assistant messages;
* ``as sent``: the same through the truncation pass (the default);
* ``newest stretch``: the last ``(1 - prune_to)`` of the budget, as sent.

Prints the median and mean ``|log(estimate / actual)|`` per window.

Run: ``python benchmarks/growth_estimates.py`` (about 20 s).
"""

from __future__ import annotations

import math
import os
import statistics

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

from langchain_context_guard import GuardPolicy, TiktokenCounter
from langchain_context_guard.engine.passes._truncate import truncator
from langchain_context_guard.replay import load_paths, shared_trajectory_dir


def _stretch(sizes: list[int], calls: list[bool], start: int, step: int, room: float):
    """Tokens and calls from ``start`` walking by ``step`` until ``room`` is held."""
    tokens = n = 0
    i = start
    while 0 <= i < len(sizes):
        tokens += sizes[i]
        n += calls[i]
        i += step
        if n and tokens >= room:
            return tokens, n, True
    return tokens, n, False


def main() -> None:
    directory = shared_trajectory_dir()
    if directory is None:
        raise SystemExit("the shared transcripts are missing (../shared/data)")
    transcripts = load_paths([directory])
    counter = TiktokenCounter()
    print("| window | estimate | calls | median abs log error | mean |")
    print("|---|---|---|---|---|")
    for window in (16_000, 32_000):
        policy = GuardPolicy(context_window=window)
        budget = policy.budget(window)
        truncate = truncator(policy, budget, counter.count_message)
        room = (1 - policy.prune_to) * budget
        errors: dict[str, list[float]] = {
            "as written": [],
            "as sent": [],
            "newest stretch": [],
        }
        for messages in transcripts.values():
            raw = [counter.count_message(m) for m in messages]
            sent = [counter.count_message(truncate(m) or m) for m in messages]
            calls = [m.type == "ai" for m in messages]
            for t in range(1, len(messages)):
                if not calls[t] or sum(sent[:t]) < budget:
                    continue
                tokens, n, full = _stretch(sent, calls, t, 1, room)
                done = sum(calls[:t])
                if not full or not done:
                    continue
                actual = tokens / n
                back, m, _ = _stretch(sent, calls, t - 1, -1, room)
                estimates = {
                    "as written": sum(raw[:t]) / done,
                    "as sent": sum(sent[:t]) / done,
                    "newest stretch": back / max(m, 1),
                }
                for name, value in estimates.items():
                    errors[name].append(abs(math.log(value / actual)))
        for name, values in errors.items():
            print(
                f"| {window // 1000}k | {name} | {len(values)} | "
                f"{statistics.median(values):.3f} | {statistics.mean(values):.3f} |"
            )


if __name__ == "__main__":
    main()
