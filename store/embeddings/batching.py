"""Token-aware batching: split texts into provider calls and run them concurrently, in order.

A batch holds at most ``batch_size`` texts, at most the provider's
``max_inputs``, and at most ``max_tokens_per_request`` estimated tokens
(``store.calls.tokens``, the chunker's estimate).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from store.calls.tokens import estimate_tokens
from store.embeddings.providers.base import Limits
from store.errors import InputError

__all__ = ["plan_batches", "run_batches"]

T = TypeVar("T")
R = TypeVar("R")


def plan_batches(texts: Sequence[str], *, batch_size: int, limits: Limits, model: str) -> list[range]:
    """Consecutive index ranges of ``texts``, each one provider call within the limits.

    Raises InputError for a text over ``limits.max_tokens_per_input``.
    """
    most = min(batch_size, limits.max_inputs)
    batches: list[range] = []
    start, tokens = 0, 0
    for index, text in enumerate(texts):
        size = estimate_tokens(text)
        if size > limits.max_tokens_per_input:
            raise InputError(
                f"a text of {len(text)} characters (~{size} tokens) is over model {model!r}'s limit of "
                f"{limits.max_tokens_per_input} tokens per input (max_tokens_per_input): chunk it smaller"
            )
        full = index - start >= most or tokens + size > limits.max_tokens_per_request
        if full and index > start:
            batches.append(range(start, index))
            start, tokens = index, 0
        tokens += size
    if start < len(texts):
        batches.append(range(start, len(texts)))
    return batches


def run_batches(batches: Sequence[T], call: Callable[[T], Sequence[R]], *, parallelism: int) -> list[R]:
    """``call`` on every batch, at most ``parallelism`` at once; results concatenated in batch order.

    The first failure (in batch order) is raised and the batches not yet started are cancelled.
    """
    if parallelism <= 1 or len(batches) <= 1:
        return [item for batch in batches for item in call(batch)]
    workers = min(parallelism, len(batches))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vectorsync-embed") as pool:
        # Each call in a copy of the caller's context: whom the calls are attributed to, what they are spent on.
        futures = [pool.submit(contextvars.copy_context().run, call, batch) for batch in batches]
        try:
            return [item for future in futures for item in future.result()]
        finally:
            for future in futures:
                future.cancel()
