"""The peer of the ``peer`` section: LangChain's indexing API over langchain-postgres's ``PGVector``.

``index(docs, SQLRecordManager, PGVector, cleanup="incremental", source_id_key="record_id")``, as
LangChain's docs set it up, then the HNSW index langchain-postgres writes (``apply_vector_index``'s
statement: ``CREATE INDEX ... USING hnsw (embedding vector_cosine_ops) WITH (m, ef_construction)``).
It is given what vectorsync works from: the rows of the same source table, cut by vectorsync's chunker
into the same chunks, embedded by the same provider chain (the bench's OpenAI-protocol server, cache off)
through ``VectorsyncEmbeddings``, stored in the same PostgreSQL. Its packages are the ``bench-peer``
extra and langchain-postgres (``scripts/bench-peer``); nothing here imports them before ``Peer`` is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from langchain_core.documents import Document

from store.adapters.langchain import VectorsyncEmbeddings
from store.connect.postgres import engine_url
from store.embeddings import Embeddings
from store.errors import ConfigError
from store.settings import Settings
from store.vectors.pgvector.building import prepare_build
from worker.pipeline.chunker import Chunker

__all__ = ["INSTALL", "Peer", "documents", "packages", "peer_embeddings"]

#: How to install the peer's packages (langchain-postgres pins pgvector below the 0.4 vectorsync imports).
INSTALL = "scripts/bench-peer (pip install -e '.[bench-peer]', then langchain-postgres with --no-deps)"
#: langchain-postgres's table of every PGVector collection's rows.
TABLE = "langchain_pg_embedding"


def documents(rows: Mapping[str, Mapping[str, Any]], settings: Settings, collection: str) -> list[Document]:
    """One Document per chunk vectorsync makes of each row: its text template, chunker and metadata columns,
    with the ``record_id`` (the source id ``index`` cleans up by) and the chunk's number."""
    config = settings.collections[collection]
    template = config.source.text or ""
    chunker = Chunker.from_settings(config.chunker)
    return [
        Document(
            page_content=chunk.text,
            metadata={
                **{column: row[column] for column in config.source.metadata},
                "record_id": record_id,
                "chunk": number,
            },
        )
        for record_id, row in rows.items()
        for number, chunk in enumerate(chunker.split(template.format_map(row)))
    ]


def peer_embeddings(settings: Settings) -> VectorsyncEmbeddings:
    """The workers' provider chain as LangChain Embeddings, without vectorsync's Redis cache in front."""
    uncached = settings.model_copy(update={"embeddings": settings.embeddings.model_copy(update={"cache_ttl_days": 0})})
    return VectorsyncEmbeddings(Embeddings.from_settings(uncached))


def packages() -> tuple[Any, Any, Any]:
    """``index``, ``SQLRecordManager`` and ``PGVector``; ConfigError naming the install when one is missing."""
    try:
        from langchain_classic.indexes import SQLRecordManager
        from langchain_core.indexing import index
        from langchain_postgres import PGVector
    except ImportError as exc:
        raise ConfigError(f"the peer section needs {exc.name}, which is not installed: run {INSTALL}") from exc
    return index, SQLRecordManager, PGVector


class Peer:
    """A PGVector collection and its record manager in the database at ``url`` (the bench's own, new)."""

    def __init__(self, url: str, settings: Settings, *, collection: str = "notes") -> None:
        self._index, manager, vector_store = packages()
        self.engine = sa.create_engine(engine_url(url))
        self.store = vector_store(
            peer_embeddings(settings),
            connection=self.engine,
            collection_name=collection,
            embedding_length=settings.vectors.dimensions,
        )
        self.manager = manager(f"pgvector/{collection}", engine=self.engine)
        self.manager.create_schema()
        self.dimensions = settings.vectors.dimensions
        self.m, self.ef_construction = settings.vectors.hnsw_m, settings.vectors.hnsw_ef_construction
        self.build_workers = settings.vectors.index_build_workers

    def sync(self, docs: list[Document]) -> dict[str, int]:
        """``index()`` the documents, cleaning up the chunks of their sources that are gone; its counts."""
        result = self._index(
            docs, self.manager, self.store, cleanup="incremental", source_id_key="record_id", key_encoder="sha256"
        )
        return dict(result)

    def build_index(self, *, sized: bool = True) -> None:
        """HNSW on the embeddings, in the build memory and parallel workers vectorsync's own build gets
        (``sized=False``: the server's defaults, as langchain-postgres leaves them)."""
        with self.engine.begin() as conn:
            if sized:
                table = sa.Table(TABLE, sa.MetaData(), autoload_with=conn)
                prepare_build(conn, table, dimensions=self.dimensions, m=self.m, workers=self.build_workers)
            conn.execute(
                sa.text(
                    f"CREATE INDEX {TABLE}_hnsw ON {TABLE} USING hnsw (embedding vector_cosine_ops) "
                    f"WITH (m = {int(self.m)}, ef_construction = {int(self.ef_construction)})"
                )
            )

    def drop_index(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"DROP INDEX {TABLE}_hnsw"))

    def chunks(self) -> int:
        """Rows the vector store holds."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {TABLE}")).scalar_one())

    def searchable(self, query: str) -> bool:
        """Whether a search finds something (through the HNSW index once it exists)."""
        return bool(self.store.similarity_search(query, k=3))

    def close(self) -> None:
        self.engine.dispose()
