"""The batch lane: a run's embedding work sent to a provider's batch endpoint, at its lower price, and its
answers held in the state database until the run's batches write them (``docs/batch-lane.md``)."""
