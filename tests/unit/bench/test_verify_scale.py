"""The verify bench's collection: chunks and ledger rows that agree, as the pipeline would write them."""

from __future__ import annotations

import numpy as np

from bench.verify_scale import CHUNKS_PER_RECORD, DIMENSIONS, MODEL, _batches, record_id


def test_each_record_has_its_chunks_named_and_counted_as_its_ledger_row_says() -> None:
    batches = list(_batches(7, np.random.default_rng(0)))
    chunks = [c for rows, _ in batches for c in rows]
    entries = [e for _, rows in batches for e in rows]
    assert [e[0] for e in entries] == [record_id(n) for n in range(7)]
    for rid, _hash, model, count, version, stamp in entries:
        mine = [c for c in chunks if c.metadata["record_id"] == rid]
        assert [c.id for c in mine] == [f"{rid}:{i}" for i in range(count)]
        assert [c.metadata["chunk"] for c in mine] == list(range(CHUNKS_PER_RECORD))
        assert {c.model for c in mine} == {model} == {MODEL}
        assert all(len(c.embedding) == DIMENSIONS and c.text for c in mine)
        assert (version, stamp) == (0, "")
