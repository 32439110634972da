"""The broker's transport: kombu's Redis transport, taking a task and recording it unacknowledged in one step
(``redis``), with every kombu name it overrides or reads checked as it is imported (``kombu_names``), and how
each form of broker URL hands tasks over (``handover``). The only part of vectorsync that touches kombu's
private methods; the bookkeeping in Redis (coalescing, pushes, reservations, ...) is ``store.broker``'s."""
