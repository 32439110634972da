"""Runs: a reindex's fan-out into batches, what a run sends once under way, and a run's budget in its batches."""
