"""The one token estimate: 4 characters a token, rounded up.

The chunker cuts with it and the batcher packs provider calls with it, so a
chunk the chunker made always fits a model's ``max_tokens_per_input``.
"""

from __future__ import annotations

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens"]

#: Characters counted as one token.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ceil(characters / CHARS_PER_TOKEN)."""
    return -(-len(text) // CHARS_PER_TOKEN)
