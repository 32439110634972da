"""The indexing pipeline of one collection generation: load -> skip unchanged -> chunk -> embed -> swap; what a batch
is made of, the chunker, and a run's leftover pool the pipeline fills its last provider call from."""
