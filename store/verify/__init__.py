"""``vectorsync verify``: a collection's ledger compared with what its store holds, record by record (scan.py), by
a pure rule (drift.py); ``repair`` fixes what drifted through the normal paths."""

from store.verify.drift import Expected, Kind, RecordDrift, Repair, Report, compare
from store.verify.scan import ChunkReader, verify

__all__ = ["ChunkReader", "Expected", "Kind", "RecordDrift", "Repair", "Report", "compare", "verify"]
