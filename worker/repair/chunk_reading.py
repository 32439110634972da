"""Records read for ``vectorsync verify`` as a worker reads them: through the pipeline of the generation a search
reads, so each record's content hash is the one the pipeline compares and its chunk texts the ones it writes."""

from __future__ import annotations

from collections.abc import Sequence

from store.client import Client
from store.errors import VectorsyncError
from store.vectors.records import clean_text, text_digest
from store.verify import Expected
from worker.runtime.context import WorkerContext
from worker.sources.push import PushSource

__all__ = ["ChunkReading"]


class ChunkReading:
    """``store.verify.ChunkReader`` over ``client``'s parts; ``close()`` releases the sources it opened and leaves
    the client open."""

    def __init__(self, client: Client) -> None:
        self._context = WorkerContext.of(client)

    def expected(self, collection: str, record_ids: Sequence[str]) -> dict[str, Expected]:
        pipeline = self._context.pipeline(collection)
        if isinstance(pipeline.source, PushSource):
            return {}  # the app holds pushed records: nothing to read
        try:
            found = pipeline.source.fetch(list(record_ids))
        except VectorsyncError:  # a page the source refuses is compared without its texts
            return {}
        expected = {i: Expected(False) for i in record_ids if i not in found}
        for record_id, record in found.items():
            try:
                digest = pipeline.content_hash(record)
            except VectorsyncError:  # metadata a worker would refuse: its batch fails it alike
                expected[record_id] = Expected(None)
                continue
            texts = tuple(text_digest(c.text) for c in pipeline.chunker.split(clean_text(record.text)))
            expected[record_id] = Expected(True, digest, texts)
        return expected

    def close(self) -> None:
        self._context.close(client=False)

    def __enter__(self) -> ChunkReading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
