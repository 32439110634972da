"""``vectorsync explain``: where one record stands, read from every part (gather.py), judged by a pure rule
(facts.py)."""

from store.explain.facts import Facts, SourceFacts, State, Verdict, verdict
from store.explain.gather import SourceReader, gather

__all__ = ["Facts", "SourceFacts", "SourceReader", "State", "Verdict", "gather", "verdict"]
