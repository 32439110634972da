"""A run's leftover pool: records whose chunks would have made a partly filled provider call, kept in Redis
until other batches of the run (or its last, the pool batch) embed them in full calls.

Each ``index_batch`` of a pooled run embeds only whole provider calls. The records whose chunks are left over
(the last call's) are put in the pool with how many texts they still need; a later batch whose own last call
is partly filled takes records from the pool (``claim``) until that call is full. So every call is full but
the pool batch's, the run's last (``POOL_BATCH`` in ``store.contract``): the fan-out counts it in the run's
batches, and it is sent when every other batch is counted; it takes everything still in the pool or in any
claim (``take_over``), embeds it, and counts last.

Counting never depends on the pool: a record is counted by the batch whose ids hold it, and one it leaves in
the pool counts as done there, because the run cannot end before the pool batch has emptied the pool. A batch
that claims records writes them and never counts them; what it could not index (failed, or to retry) goes back
to the pool for the pool batch alone (``settle``), and the pool batch's count moves the records that failed
from done to failed. So any attempt of a batch (a retry, a redelivery, a second fan-out's copy) counts the
same records, and the one counted first stands.

Nothing is lost when a worker or the pool's Redis (often the broker's own) goes away:

- a record in the pool or in a claim is the pool batch's to write if no claimer does, and the pool batch
  writes again whatever a claim still holds, since writing a record twice is harmless (it re-checks the
  source under the record's lock, and its texts are cache hits);
- a batch that cannot claim indexes its own ids alone; one that cannot defer embeds its leftovers at once;
  one that cannot settle leaves its claim for the pool batch; none of them needs a retry (nor the broker);
- a batch that left records in Redis after its run ended sends the pool batch again;
- every key expires (``ttl_seconds`` after its last write), so a run whose tasks were lost leaves nothing.

Every write re-checks the source under the records' locks as always, so a pooled record is written as the
source holds it when its write happens. A live ``index_record`` never touches the pool.

Keys (prefix ``POOL_KEY_PREFIX``): ``<run>`` (record id -> texts still to embed; 0 for a record only the pool
batch takes), ``<run>:claims`` (the owners with a claim), ``<run>:claim:<owner>`` (an owner's claimed records).
"""

from worker.pooling.pool import DEFAULT_TTL_SECONDS, LeftoverPool, RunPool

__all__ = ["DEFAULT_TTL_SECONDS", "LeftoverPool", "RunPool"]
