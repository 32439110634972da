"""Model-call machinery shared by embeddings and retrieval: the failover engine, the shared rate limit,
call and token accounting, the one token estimate, and the thread budget of local models."""
