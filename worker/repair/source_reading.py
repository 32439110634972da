"""A record read for ``vectorsync explain`` as a worker reads it: through the pipeline of the generation a search
reads, so its row comes from the same source and its content hash is the one the pipeline would compare."""

from __future__ import annotations

from store.client import Client
from store.errors import VectorsyncError
from store.explain import SourceFacts
from store.explain.gather import declared
from worker.runtime.context import WorkerContext

__all__ = ["SourceReading"]


class SourceReading:
    """``store.explain.SourceReader`` over ``client``'s parts; ``close()`` releases the sources it opened and
    leaves the client open."""

    def __init__(self, client: Client) -> None:
        self._context = WorkerContext.of(client)

    def read(self, collection: str, record_id: str) -> SourceFacts:
        kind = declared(self._context.settings, collection).source.kind
        try:
            pipeline = self._context.pipeline(collection)
            found = pipeline.source.fetch([record_id]).get(record_id)
        except VectorsyncError as exc:
            return SourceFacts(kind, None, note=f"could not be read ({exc})")
        if found is None:
            return SourceFacts(kind, False)
        digest, note = None, ""
        try:
            digest = pipeline.content_hash(found)
        except VectorsyncError as exc:  # metadata a worker would refuse: its batch fails the record alike
            note = f"its content hash cannot be computed ({exc})"
        return SourceFacts(
            kind, True, text=found.text, metadata=dict(found.metadata), stamp=found.stamp, hash=digest, note=note
        )

    def close(self) -> None:
        self._context.close(client=False)

    def __enter__(self) -> SourceReading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
