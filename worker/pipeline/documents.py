"""The pushed-document writer: documents an app pushed with their content, written or deleted over one
generation's ``Pipeline``, the newest push of each id winning whatever order they arrive in."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from store.erasure.copies import erase
from store.errors import ConfigError
from store.state.ledger import Held, LedgerEntry
from worker.pipeline.batch import BatchResult, Document, Planned, WriteCheck, storable
from worker.pipeline.core import Pipeline
from worker.sources.base import SourceRecord
from worker.sources.push import PushSource

__all__ = ["DocumentWriter"]


class DocumentWriter:
    """Writes and deletes the documents pushed to one generation of a collection whose source is ``push``."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def index_documents(self, documents: Sequence[Document]) -> BatchResult:
        """Index pushed documents; an older push of an id than the one indexed is dropped.

        Raises ConfigError for a collection that reads its records from a source."""
        self._require_pushed()
        pipeline, result = self.pipeline, BatchResult()
        good = set(storable([d.id for d in documents], result, max_chars=pipeline.limits.max_id_chars))
        newest: dict[str, Document] = {}
        for doc in (d for d in documents if d.id in good):
            if doc.id not in newest or doc.version >= newest[doc.id].version:
                newest[doc.id] = doc
        records = [SourceRecord(d.id, d.text, dict(d.metadata)) for d in newest.values()]
        planned = pipeline.plan(records, result, versions={d.id: d.version for d in newest.values()})
        ready = pipeline.embed(planned, result, pipeline.reuse())
        pipeline.swap(ready, result, check=WriteCheck(_newest_push, reads_ledger=True))
        return result

    def delete_documents(self, ids: Sequence[str], *, version: int = 0) -> BatchResult:
        """Remove pushed documents, unless a newer push of them was indexed.

        The ledger keeps a tombstone (no content hash) at ``version``, so a push
        older than the delete that arrives late is dropped too.
        """
        self._require_pushed()
        pipeline, result = self.pipeline, BatchResult()
        ids = storable(list(ids), result, max_chars=pipeline.limits.max_id_chars)
        with pipeline.ledger.locked(pipeline.name, ids, read=True) as held:
            known = held.entries(list(ids))
            gone = [i for i in ids if i not in known or known[i].version <= version]
            if gone:
                erase(pipeline.collection, gone, cache=pipeline.embeddings.cache, scope=pipeline.cache_scope)
                held.record_indexed([LedgerEntry(i, "", "", 0, version) for i in gone])
        result.deleted.extend(gone)
        result.superseded.extend(i for i in ids if i not in gone)
        return result

    def _require_pushed(self) -> None:
        source, name = self.pipeline.source, self.pipeline.name
        if not isinstance(source, PushSource):
            raise ConfigError(
                f"collection {name!r} reads its records from its source ({type(source).__name__}); "
                "index_document and delete_document are for collections whose records are pushed "
                f"(collections.{name}.source.kind = 'push'): use index_record for this one"
            )


def _newest_push(ids: Sequence[str], held: Held) -> Callable[[Planned], bool]:
    """Pushed records: a result is current unless a newer push (or delete) was indexed meanwhile."""
    known = held.entries(ids)

    def current(plan: Planned) -> bool:
        entry = known.get(plan.record.id)
        return entry is None or entry.version <= plan.version

    return current
