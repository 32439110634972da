"""ONNX Runtime's encoder of local models: length-sorted batches that still give the vectors back in the caller's
order (the model itself: tests/integration/store/embeddings/providers/test_local.py)."""

from __future__ import annotations

from store.embeddings.providers.onnx import length_batches

TEXTS = [
    "Invoice paid.",
    "The customer is worried about how long onboarding takes for nurses on night shifts, and asked for short "
    "video lessons instead of live sessions, because their staff have little time for training.",
    "Renewal in November; the new CFO reviews every vendor.",
    "ok",
    "Exports from the reporting module are slow; engineering has a fix scheduled and we promised an update "
    "every two days.",
    "Pricing tiers above 500 seats?",
]


def test_length_batches_cover_every_text_once_longest_first() -> None:
    batches = list(length_batches(TEXTS, 4))
    assert [len(b) for b in batches] == [4, 2]
    order = [i for b in batches for i in b]
    assert sorted(order) == list(range(len(TEXTS)))
    assert [len(TEXTS[i]) for i in order] == sorted(map(len, TEXTS), reverse=True)
