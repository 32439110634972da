"""Tokens: the one estimate (4 characters a token, rounded up), and each model's own count.

The chunker cuts with the estimate and the batcher packs provider calls with it, so a chunk the chunker made
always fits a model's ``max_tokens_per_input``. What a call costs is counted by the model's tokenizer where
there is one (``token_counter``): OpenAI's embedding models with ``cl100k_base`` (the ``bpe-openai`` wheel,
offline), a ``local`` model with its own ``tokenizer.json``; anything else with the estimate, labelled so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from store.settings import ModelSettings

__all__ = [
    "CHARS_PER_TOKEN",
    "ESTIMATE",
    "OPENAI_EMBEDDING_MODELS",
    "CountedBy",
    "TokenCounter",
    "estimate_tokens",
    "token_counter",
]

#: Characters counted as one token.
CHARS_PER_TOKEN = 4
#: OpenAI's embedding models; all three count with ``cl100k_base``.
OPENAI_EMBEDDING_MODELS = frozenset({"text-embedding-3-small", "text-embedding-3-large", "text-embedding-ada-002"})
#: Hosts whose ``openai`` models are OpenAI's own (OpenAI, Azure OpenAI): their tokens are cl100k's.
_OPENAI_HOSTS = ("api.openai.com", ".openai.azure.com")

#: How a token count was made: the model's own tokenizer, or ``estimate_tokens``.
CountedBy = Literal["tokenizer", "estimate"]


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ceil(characters / CHARS_PER_TOKEN)."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts a model's tokens; ``counted_by`` says whether by its tokenizer or by the estimate (say which
    wherever a count is shown). Safe to share between threads."""

    counted_by: CountedBy
    #: What counts: an encoding's name ("cl100k_base"), a tokenizer file, or "estimate".
    name: str
    _count: Callable[[str], int] = field(repr=False, compare=False)

    def count(self, text: str) -> int:
        """Tokens of ``text``, special tokens not added."""
        return self._count(text)

    def total(self, texts: Iterable[str]) -> int:
        """Tokens of all ``texts``, as one call sends them."""
        return sum(self._count(text) for text in texts)


#: The estimate as a counter: for models whose tokenizer is not known here.
ESTIMATE = TokenCounter("estimate", "estimate", estimate_tokens)


def token_counter(model: ModelSettings) -> TokenCounter:
    """The counter of ``model``: cl100k_base for OpenAI's embedding models (by name, or provider ``openai`` at
    OpenAI's or Azure's endpoint), the ``local`` model's own tokenizer, else ``ESTIMATE``."""
    if model.model in OPENAI_EMBEDDING_MODELS or (model.provider == "openai" and _at_openai(model.base_url)):
        return TokenCounter("tokenizer", "cl100k_base", _cl100k_count)
    if model.provider == "local":
        tokenizer = _tokenizer_file(model.model)
        if tokenizer is not None:
            return TokenCounter("tokenizer", str(tokenizer), _LazyTokenizer(tokenizer))
    return ESTIMATE


def _at_openai(base_url: str | None) -> bool:
    # Another base_url serves other models under the openai API (Ollama, vLLM, TEI): their tokenizer is not cl100k.
    from urllib.parse import urlsplit

    if base_url is None:
        return True
    host = urlsplit(base_url).hostname or ""
    return any(host == suffix or host.endswith(suffix) for suffix in _OPENAI_HOSTS)


@cache
def _cl100k() -> Callable[[str], list[int]]:
    """cl100k_base's ``encode_ordinary``, loaded once a process (about half a second); special-token text
    such as ``<|endoftext|>`` counts as plain text, as the embeddings API counts it."""
    import bpe_openai

    encode: Callable[[str], list[int]] = bpe_openai.get_encoding("cl100k_base").encode_ordinary
    return encode


def _cl100k_count(text: str) -> int:
    return len(_cl100k()(text)) if text else 0


def _tokenizer_file(model: str) -> Path | None:
    """The ``tokenizer.json`` of a local model's folder (the bundled one's too); None when there is none."""
    from store.calls.bundled import model_location
    from store.errors import ConfigError

    try:
        found = Path(model_location(model)) / "tokenizer.json"
    except ConfigError:  # the bundled model's package is not installed: no tokenizer to count with
        return None
    return found if found.is_file() else None


class _LazyTokenizer:
    """A ``tokenizers`` tokenizer loaded on first count and kept per file for the process; no special tokens
    ([CLS], [SEP]) and no truncation: the tokens of the text itself."""

    _loaded: ClassVar[dict[Path, Any]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, text: str) -> int:
        return len(self._tokenizer().encode(text, add_special_tokens=False).ids) if text else 0

    def _tokenizer(self) -> Any:
        with self._lock:
            if self.path not in self._loaded:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.path))
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._loaded[self.path] = tokenizer
            return self._loaded[self.path]
