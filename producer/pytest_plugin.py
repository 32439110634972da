"""pytest fixtures for apps that enqueue vectorsync tasks: load with ``pytest_plugins = ["producer.pytest_plugin"]``.

    def test_an_upload_is_found(vectorsync_queue):
        index_document("uploads", "doc-7", "Dana asked to move the onboarding call")
        vectorsync_queue.run_queue()
        assert search("uploads", "onboarding call")[0].metadata["record_id"] == "doc-7"

Override ``vectorsync_settings`` to give the tests settings other than the app's vectorsync.toml.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from producer.testing import TaskQueue, queue
from store.settings import Settings

__all__ = ["vectorsync_queue", "vectorsync_settings"]


@pytest.fixture
def vectorsync_settings() -> Settings | Mapping[str, Any] | None:
    """The settings ``vectorsync_queue`` makes in-process (None: ``load_settings()``, the app's file)."""
    return None


@pytest.fixture
def vectorsync_queue(vectorsync_settings: Settings | Mapping[str, Any] | None) -> Iterator[TaskQueue]:
    """Every vectorsync task the test sends, captured to run in the test: ``run_pending()``, ``run_queue()``."""
    with queue(vectorsync_settings) as tasks:
        yield tasks
