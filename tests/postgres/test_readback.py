"""Pins, superseded reads and offloaded images on a real PostgreSQL server.

The same agent loops as on SQLite (``tests/adapters``): a model that pins a
result keeps it verbatim through the trims, a superseded read is read back by
its pointer, an old image is viewed back; another thread gets none of them.
"""

from __future__ import annotations

from tests.adapters.test_images import check_images_offloaded_and_viewed
from tests.adapters.test_pins import check_pins_stay
from tests.adapters.test_results_superseded import check_superseded_read_back
from tests.postgres._support import postgres


def test_the_model_pins_a_result_on_a_postgres_checkpoint(pg_url: str) -> None:
    with postgres(pg_url) as (saver, _store):
        check_pins_stay(saver)


def test_an_agent_reads_a_superseded_read_back_from_postgres(pg_url: str) -> None:
    with postgres(pg_url) as (_saver, store):
        check_superseded_read_back(store)


def test_an_agent_views_an_offloaded_image_back_from_postgres(pg_url: str) -> None:
    with postgres(pg_url) as (_saver, store):
        check_images_offloaded_and_viewed(store)
