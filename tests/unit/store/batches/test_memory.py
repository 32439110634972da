"""The reference lane state's own promises beside the shared ones (``tests/integration/store/batches/
test_postgres.py`` runs those on it too): a look refused while another holds the run, never waited for."""

from __future__ import annotations

import threading

from store.batches.memory import MemoryLaneState


def test_a_second_look_at_the_same_run_is_refused_not_queued() -> None:
    state = MemoryLaneState()
    with state.ticking("r") as first, state.ticking("r") as second, state.ticking("other") as other:
        assert first and not second and other
    seen: list[bool] = []
    with state.ticking("r"):
        thread = threading.Thread(target=lambda: seen.append(state.ticking("r").__enter__()))
        thread.start()
        thread.join(timeout=5)
    assert seen == [False]
