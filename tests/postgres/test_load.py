"""A small load run: worker processes share the steps of threads on PostgreSQL."""

from __future__ import annotations

from tests.postgres._load import check_histories, run_load
from tests.postgres._server import PostgresServer

WORKERS, THREADS, STEPS = 3, 6, 12


def test_workers_share_threads_without_loss_or_overflow(
    pg_server: PostgresServer,
) -> None:
    url = pg_server.create_database("load")
    steps, _wall = run_load(url, workers=WORKERS, threads=THREADS, steps=STEPS)
    assert len(steps) == THREADS * STEPS
    assert [s for s in steps if s.over_budget] == []
    assert [s for s in steps if s.bad_pairs] == []
    assert check_histories(url, THREADS, STEPS) == []
    # steps of one thread really went to different processes
    assert all(
        len({s.worker for s in steps if s.thread == t}) > 1
        for t in {s.thread for s in steps}
    )
