"""``[collections.NAME.budget]``: the caps of a collection's runs."""

from __future__ import annotations

from pydantic import Field

from store.settings.section import Section

__all__ = ["BudgetSettings"]


class BudgetSettings(Section):
    """``[collections.NAME.budget]``: the caps of each run of the collection that names none of its own
    (runs started by capture, beat, sweeps, or ``reindex`` without ``--max-*``). A run about to pass one
    pauses (``vectorsync runs resume``). Live ``index_record`` tasks and pushed documents belong to no run
    and are never capped: their spend is recorded under run "" and counted in Prometheus."""

    #: Tokens a run may spend, as its calls are counted (None: no cap).
    max_tokens: int | None = Field(default=None, gt=0)
    #: Cost a run may spend at its models' declared prices; calls of a model with no price cost nothing here.
    max_cost: float | None = Field(default=None, gt=0)
