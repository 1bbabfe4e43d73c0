"""Many workers, one prompt: steps of a thread served by different processes.

Two worker processes alternate the steps of 20 threads on one PostgreSQL
database; every prompt must be byte-identical to the one a single process sends,
so the provider's prefix cache hits just as often. Then a worker is restarted
mid-thread. For both adapters: ``create_agent`` + ``ContextGuardMiddleware``
(records in the replies) and ``create_react_agent`` + the ``llm_input``
``pre_model_hook`` on ``GuardedAgentState`` (records in the state), and
``create_react_agent`` with ``guarded_model`` (records in the replies).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.postgres._server import PostgresServer

THREADS = [f"w{i:02d}" for i in range(20)]
STEPS = 9  # model calls per thread: 8 tool calls, then the answer
ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """A ``tests.postgres._worker`` process: one step per request."""

    def __init__(self, url: str, adapter: str = "middleware") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.postgres._worker", url, adapter],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self._line()) == {"ready": True}

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker exited with {self.proc.wait()}")
        return line

    def step(self, thread: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(thread + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self._line()))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        assert code == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


@contextmanager
def workers(url: str, n: int, adapter: str = "middleware") -> Iterator[list[Worker]]:
    with ExitStack() as stack:
        pool = []
        for _ in range(n):
            worker = Worker(url, adapter)
            stack.callback(worker.kill)
            pool.append(worker)
        yield pool
        for worker in pool:
            worker.close()


Prompts = dict[str, list[dict[str, Any]]]


def run(url: str, pick: Callable[[int, int], Worker]) -> Prompts:
    """Every step of every thread, round-robin over threads; ``pick(step, t)``."""
    prompts: Prompts = {t: [] for t in THREADS}
    for s in range(STEPS):
        for i, thread in enumerate(THREADS):
            prompts[thread].append(pick(s, i).step(thread))
    return prompts


def hit_rate(prompts: Prompts) -> float:
    """Share of prompt messages a prefix cache holds from the thread's last call."""
    hit = total = 0
    for calls in prompts.values():
        previous: list[str] = []
        for call in calls:
            each = call["messages"]
            n = 0
            while n < min(len(each), len(previous)) and each[n] == previous[n]:
                n += 1
            hit += n
            total += len(each)
            previous = each
    return hit / total


def _shas(prompts: Prompts) -> dict[str, list[str]]:
    return {t: [c["sha"] for c in calls] for t, calls in prompts.items()}


ADAPTERS = pytest.mark.parametrize("adapter", ["middleware", "hook", "model"])


@ADAPTERS
def test_two_processes_send_the_prompts_one_would(
    pg_server: PostgresServer, adapter: str
) -> None:
    with workers(pg_server.create_database(f"single_{adapter}"), 1, adapter) as (solo,):
        single = run(pg_server.url(f"single_{adapter}"), lambda s, i: solo)
    with workers(pg_server.create_database(f"pair_{adapter}"), 2, adapter) as pair:
        alternating = run(
            pg_server.url(f"pair_{adapter}"), lambda s, i: pair[(s + i) % 2]
        )
    assert _shas(alternating) == _shas(single)
    assert hit_rate(alternating) == hit_rate(single)
    # the runs prune (so there is something to hand over) and reuse in between
    sizes = [len(c["messages"]) for calls in single.values() for c in calls]
    assert min(sizes[1:]) < max(sizes)
    assert hit_rate(single) > 0.5


@ADAPTERS
def test_a_restarted_worker_sends_the_same_prompts(
    pg_server: PostgresServer, adapter: str
) -> None:
    with workers(pg_server.create_database(f"solo2_{adapter}"), 1, adapter) as (solo,):
        single = run(pg_server.url(f"solo2_{adapter}"), lambda s, i: solo)
    url = pg_server.create_database(f"restart_{adapter}")
    prompts: Prompts = {t: [] for t in THREADS}
    half = STEPS // 2
    for steps in (range(half), range(half, STEPS)):  # a new process mid-thread
        with workers(url, 1, adapter) as (worker,):
            for _ in steps:
                for thread in THREADS:
                    prompts[thread].append(worker.step(thread))
    assert _shas(prompts) == _shas(single)
    assert hit_rate(prompts) == hit_rate(single)
