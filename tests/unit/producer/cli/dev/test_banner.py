"""What ``vectorsync dev`` prints once it runs: where each part answers, what to try, and the line tests wait for."""

from __future__ import annotations

from pathlib import Path

from producer.cli.console import out
from producer.cli.dev.banner import SERVING, TRY_QUERY, TRY_UPDATE, serving_banner


def printed(serve: bool, flower_url: str | None) -> str:
    with out.capture() as captured:
        serving_banner(
            config=Path("/tmp/dev dir/vectorsync.toml"),
            redis_url="redis://127.0.0.1:6390/0",
            database_url="postgresql://postgres:@/vectorsync?host=/tmp/pg",
            flower_url=flower_url,
            logs=Path("/tmp/dev dir/logs"),
            serve=serve,
        )
    return captured.get()


def test_serving_says_where_each_part_is_and_what_to_try() -> None:
    text = printed(True, "http://127.0.0.1:5555")
    assert "http://127.0.0.1:5555" in text and "redis://127.0.0.1:6390/0" in text
    assert "VECTORSYNC_CONFIG='/tmp/dev dir/vectorsync.toml'" in text  # quoted for the shell
    assert TRY_UPDATE in text and TRY_QUERY in text
    assert text.rstrip().endswith(SERVING)


def test_without_serving_or_flower_it_says_so() -> None:
    text = printed(False, None)
    assert "--no-serve: stopping now" in text and SERVING not in text
    assert "not running (pip install 'vectorsync[flower]')" in text
