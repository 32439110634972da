"""What an index build under way says of itself (store.vectors.pgvector.building.BuildProgress): the line
``status`` and ``reindex --wait`` show."""

from __future__ import annotations

from store.vectors.pgvector.building import BuildProgress


def test_a_build_counts_tuples_first_then_blocks_and_shows_its_share_of_the_phase() -> None:
    loading = BuildProgress(
        pid=7,
        seconds=12.4,
        phase="building index: loading tuples",
        index="vs_notes_embedding_idx",
        blocks_done=90,
        blocks_total=100,
        tuples_done=12_000,
        tuples_total=40_000,
    )
    assert loading.fraction == 0.3
    assert loading.describe() == (
        "vs_notes_embedding_idx: building index: loading tuples 12,000/40,000 tuples (30%), 12 s"
    )
    scanning = BuildProgress(pid=7, seconds=3, phase="building index: scanning table", blocks_done=5, blocks_total=20)
    assert scanning.fraction == 0.25 and scanning.describe() == "building index: scanning table 5/20 blocks (25%), 3 s"


def test_a_build_waiting_for_the_table_has_no_share_to_show() -> None:
    waiting = BuildProgress(pid=7, seconds=40, phase="waiting for a lock")
    assert waiting.fraction is None and waiting.describe() == "waiting for a lock, 40 s"
