"""The plan's call count agrees with the batcher's: ``pack`` against ``plan_batches`` on any texts and limits
(hypothesis), and a pooled tally counts each distinct text once, in the order first added."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from store.calls.tokens import estimate_tokens
from store.embeddings.batching import plan_batches
from store.embeddings.providers.base import Limits
from store.plan.tally import Tally, pack

texts = st.lists(st.text(alphabet="ab ", min_size=1, max_size=60), max_size=60)


@given(
    texts,
    st.integers(1, 8),
    st.integers(1, 8),
    st.integers(15, 200),
)
def test_pack_counts_the_calls_plan_batches_makes(items: list[str], size: int, inputs: int, per_request: int) -> None:
    limits = Limits(max_inputs=inputs, max_tokens_per_request=per_request, max_tokens_per_input=15)
    expected = len(plan_batches(items, batch_size=size, limits=limits, model="m"))
    assert pack([estimate_tokens(t) for t in items], call_size=size, limits=limits) == expected


def test_a_pooled_tally_counts_each_text_once_and_packs_them_all_together() -> None:
    tally = Tally(3, Limits(), lambda text: len(text.split()), pooled=True)
    tally.add(["one two", "three", "four five six"])
    tally.add(["three", "seven"])  # "three" again: the cache answers it
    tally.count()
    assert (tally.texts, tally.tokens, tally.calls) == (4, 7, 2)
    assert tally.estimated == sum(estimate_tokens(t) for t in ["one two", "three", "four five six", "seven"])


def test_an_unpooled_tally_packs_each_batch_alone_and_buys_a_repeated_text_again() -> None:
    tally = Tally(3, Limits(), lambda text: 1, pooled=False)
    tally.add(["a", "b"])
    tally.add(["b", "c"])
    assert (tally.count().texts, tally.tokens, tally.calls) == (4, 4, 2)
