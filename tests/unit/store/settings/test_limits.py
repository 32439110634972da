"""``[limits]``: caps on one input, each positive and below what the stores can hold."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings.limits import LimitSettings


def test_a_record_id_fits_a_btree_row_by_default_and_at_most() -> None:
    assert LimitSettings().max_id_chars == 512
    assert LimitSettings(max_id_chars=2000).max_id_chars == 2000
    with pytest.raises(ValidationError):
        LimitSettings(max_id_chars=2001)


@pytest.mark.parametrize("key", ["max_metadata_depth", "max_chunks_per_record", "max_filter_depth", "max_filter_terms"])
def test_a_cap_of_zero_is_refused(key: str) -> None:
    with pytest.raises(ValidationError):
        LimitSettings.model_validate({key: 0})
