"""The one keyword analyzer: text to index terms, the same in every backend, so BM25 scores agree across them.

Rules, in order:

1. Unicode NFKC, then lower case (``str.casefold``).
2. Words are runs of Unicode letters and digits. Words joined by ``_``, ``-`` or ``.`` with nothing between
   form one *compound* (``git_config``, ``no-ff``, ``os.path.join``, ``v1.2``); leading and trailing
   connectors are dropped (``--no-ff`` is ``no-ff``, ``__init__`` is ``init``). Anything else separates,
   apostrophes included (``don't`` is ``don`` and ``t``).
3. A compound gives itself, unstemmed and never a stop word, and then each of its words as a plain word:
   ``git_config`` gives ``git_config``, ``git``, ``config``; so a query naming the identifier matches it
   first, and one naming its words still finds it.
4. A plain word is dropped if it is a stop word of the language; one with a digit in it (``e1101``) is kept
   as it is; the others are stemmed with the language's Snowball stemmer (``configured`` -> ``configur``).
5. Terms longer than ``MAX_TERM_CHARS`` are dropped (encoded data, not words).

``simple`` has no stop words and no stemmer. The stop words are the Snowball project's lists as PostgreSQL
ships them (``stopwords/``); the stemmers are the ``snowballstemmer`` package's.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from functools import cache
from importlib import resources
from typing import Any

from store.errors import ConfigError
from store.settings.search import LANGUAGES

__all__ = ["ANALYZER_VERSION", "MAX_TERM_CHARS", "Analyzer", "analyzer"]

#: Bumped whenever the rules above change: stored terms made by another version are analyzed again.
ANALYZER_VERSION = 1
#: Longer terms are dropped.
MAX_TERM_CHARS = 64
#: Stems remembered per analyzer (words repeat: a cache makes the pure-Python stemmer cheap).
STEM_CACHE = 200_000
#: Most tokens this process has analyzed and whose terms it remembers (a pure function of the token).
TOKEN_CACHE = 200_000

_WORD = r"[^\W_]+"
_TOKEN = re.compile(rf"{_WORD}(?:[_.\-]{_WORD})*")
_PART = re.compile(_WORD)


class Analyzer:
    """Text to terms for one language; ``identity`` names the rules and language the stored terms were made by."""

    def __init__(self, language: str) -> None:
        if language not in LANGUAGES:
            raise ConfigError(
                f"analyzer language {language!r} is not allowed: use one of {', '.join(LANGUAGES)} "
                "(collections.NAME.search.language)"
            )
        self.language = language
        self.identity = f"{language}/{ANALYZER_VERSION}"
        self._stop = _stop_words(language)
        self._stemmer: Any = None if language == "simple" else _stemmer(language)
        self._stems: dict[str, str] = {}
        self._tokens: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()  # snowballstemmer's stemmer objects keep state between calls

    def __repr__(self) -> str:
        return f"<Analyzer {self.identity}>"

    def terms(self, text: str) -> list[str]:
        """The terms of ``text`` in order, repeats kept (a document's term frequencies and length)."""
        found: list[str] = []
        known = self._tokens
        for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
            terms = known.get(token)
            if terms is None:
                terms = self._token_terms(token)
                if len(known) < TOKEN_CACHE:
                    known[token] = terms
            found.extend(terms)
        return found

    def _token_terms(self, token: str) -> tuple[str, ...]:
        """A token's terms: the whole compound (``foo_bar``, ``v1.2``) when short enough, then each part."""
        parts = _PART.findall(token)
        whole = (token,) if len(parts) > 1 and len(token) <= MAX_TERM_CHARS else ()
        return whole + tuple(term for part in parts if (term := self._word(part)))

    def frequencies(self, text: str) -> Counter[str]:
        """Each term of ``text`` with how often it occurs."""
        return Counter(self.terms(text))

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in order: a repeated query term counts once."""
        return list(dict.fromkeys(self.terms(text)))

    def _word(self, word: str) -> str | None:
        if word in self._stop or len(word) > MAX_TERM_CHARS:
            return None
        if self._stemmer is None or any(c.isdigit() for c in word):
            return word
        stem = self._stems.get(word)
        if stem is None:
            with self._lock:
                stem = self._stemmer.stemWord(word)
            if len(self._stems) < STEM_CACHE:
                self._stems[word] = stem
        return stem


@cache
def analyzer(language: str) -> Analyzer:
    """The shared analyzer of ``language`` (one per process: its stem cache is shared)."""
    return Analyzer(language)


def _stop_words(language: str) -> frozenset[str]:
    if language == "simple":
        return frozenset()
    text = resources.files("store.vectors.keyword").joinpath("stopwords", f"{language}.txt").read_text("utf-8")
    return frozenset(word.strip().casefold() for word in text.splitlines() if word.strip())


def _stemmer(language: str) -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer(language)
