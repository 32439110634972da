"""``[collections.NAME.budget]``: caps are positive, and unset means no cap."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings import BudgetSettings, CollectionSettings


def test_a_budget_caps_nothing_unless_told_and_refuses_a_cap_that_is_not_positive() -> None:
    assert BudgetSettings() == BudgetSettings(max_tokens=None, max_cost=None)
    assert CollectionSettings.model_validate({"budget": {"max_tokens": 10}}).budget.max_tokens == 10
    for bad in ({"max_tokens": 0}, {"max_cost": -1.0}, {"max_tokens": 1.5}):
        with pytest.raises(ValidationError):
            BudgetSettings.model_validate(bad)
    with pytest.raises(ValidationError, match="extra"):
        BudgetSettings.model_validate({"max_calls": 3})
