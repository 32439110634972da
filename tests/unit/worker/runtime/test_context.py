"""What a worker process builds from its settings (worker/runtime/context.py): pipelines that keep the settings'
limits."""

from __future__ import annotations

from store.settings import Settings
from store.state.ledger import MemoryLedger
from worker.pipeline.indexer import Indexer
from worker.runtime.context import WorkerContext


def load(ids: list[str] | None) -> list[dict[str, object]]:
    """This test's Python source: a short record and one of 40 paragraphs."""
    records = {"short": "a few words", "long": "\n\n".join(f"paragraph {i} " + "word " * 40 for i in range(40))}
    return [{"id": key, "text": text, "metadata": {}} for key, text in records.items() if ids is None or key in ids]


def test_a_pipeline_keeps_the_settings_limits() -> None:
    """A worker's Indexers (its pipelines now) were built without the settings' [limits], so only the defaults
    applied."""
    settings = Settings(
        vectors={"store": "memory", "dimensions": 8},
        embeddings={"cache_ttl_days": 0},
        limits={"max_chunks_per_record": 5},
        collections={
            "notes": {
                "source": {"kind": "python", "loader": f"{__name__}:load"},
                "chunker": {"max_tokens": 64, "overlap": 8},
            }
        },
    )
    ctx = WorkerContext.from_settings(settings, ledger=MemoryLedger())
    try:
        pipeline = ctx.pipeline("notes")
        assert pipeline.limits == settings.limits
        result = Indexer(pipeline).index(["short", "long"])
    finally:
        ctx.close()
    assert result.indexed == ["short"]
    assert "over limits.max_chunks_per_record (5)" in result.failed["long"]
