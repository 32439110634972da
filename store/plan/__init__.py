"""``vectorsync reindex --plan`` and ``migrate --plan``: what a run would read, embed, reuse and cost, found without
calling a provider (``costing.plan``), reported as a ``Plan`` (``report``)."""

from store.plan.costing import PlanReader, Target, plan
from store.plan.report import Judged, Plan
from store.plan.tally import Tally

__all__ = ["Judged", "Plan", "PlanReader", "Tally", "Target", "plan"]
