"""Which modes ``vectorsync eval`` scores when none are named: every mode for a collection that keeps a keyword
index, vector search alone (said on stderr) for one that keeps none, whose keyword searches would be refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from producer.cli.eval import default_modes


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "vectorsync.toml"
    config.write_text(
        '[collections.plain.source]\nkind = "push"\n'
        '[collections.hybrid.source]\nkind = "push"\n[collections.hybrid.search]\nmode = "hybrid"\n'
        '[collections.kept.source]\nkind = "push"\n[collections.kept.search]\nkeywords = true\n'
    )
    monkeypatch.setenv("VECTORSYNC_CONFIG", str(config))


def test_every_mode_where_the_keyword_index_is_kept(settings: None) -> None:
    assert default_modes("hybrid") == default_modes("kept") == "vector,keyword,hybrid"


def test_vector_alone_where_it_is_not_and_stderr_says_why(settings: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert default_modes("plain") == "vector"
    assert "plain keeps no keyword index (search.keywords): evaluating vector search alone" in capsys.readouterr().err
