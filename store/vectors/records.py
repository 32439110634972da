"""What goes into a collection and what comes back out of a search."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from store.errors import ConfigError
from store.settings import LimitSettings, default
from store.settings.collection_names import check_collection_name

__all__ = [
    "RESERVED_METADATA",
    "ChunkDigest",
    "StoredChunk",
    "VectorMatch",
    "VectorRecord",
    "canonical_json",
    "check_collection_name",
    "check_id_length",
    "check_record_id",
    "clean_text",
    "escape_unstorable",
    "quoted_id",
    "text_digest",
    "validate_vector",
]

#: Levels of nesting metadata may have unless told otherwise (limits.max_metadata_depth).
DEFAULT_MAX_DEPTH: int = default(LimitSettings, "max_metadata_depth")
#: Characters a record id may have unless told otherwise (limits.max_id_chars).
DEFAULT_MAX_ID_CHARS: int = default(LimitSettings, "max_id_chars")
#: Metadata keys the pipeline writes and the backends index; their types are fixed.
RESERVED_METADATA = {"record_id": str, "chunk": int}

#: Lone surrogates cannot be encoded as UTF-8; NUL is refused by PostgreSQL text.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class VectorRecord:
    """One stored vector: an id unique in its collection, the text it embeds and metadata."""

    id: str
    embedding: Sequence[float]
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""


@dataclass(frozen=True, slots=True)
class VectorMatch:
    """One search hit; a higher score is closer."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """One stored chunk of a record as its backend keeps it: ``written_at`` is None where the backend keeps no
    write time (memory, Qdrant)."""

    id: str
    chunk: int
    text: str
    model: str
    written_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ChunkDigest:
    """One stored chunk as ``verify`` compares it: its text as a sha256 (``text_digest``), and its vector's size
    (None where the backend does not say)."""

    id: str
    record_id: str
    chunk: int
    text_hash: str
    model: str
    dimensions: int | None = None


def text_digest(text: str) -> str:
    """The sha256 of a chunk's text (UTF-8), as ``ChunkDigest.text_hash`` holds it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def clean_text(text: str) -> str:
    """Drop NUL characters and lone surrogates, which no backend can store."""
    return _UNSTORABLE.sub("", text)


def has_unstorable(text: str) -> bool:
    """Whether ``text`` holds a NUL character or a lone surrogate."""
    return _UNSTORABLE.search(text) is not None


def escape_unstorable(text: str) -> str:
    """``text`` with NUL characters and lone surrogates written as escapes: storable, and still telling."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _plain(value: Any) -> Any:
    """An ``Embedding`` or a numpy value as the JSON-plain list or number it holds; anything else unchanged."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, str | bytes) else value


def _clean_json(value: Any) -> Any:
    value = _plain(value)
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"keys must be strings, got {[k for k in value if not isinstance(k, str)]!r}")
        unstorable = [k for k in value if has_unstorable(k)]
        if unstorable:  # dropping the character would merge it with another key, and which value won was luck
            raise TypeError(
                f"key {escape_unstorable(unstorable[0])!r} holds a NUL character or a lone surrogate, "
                "which no backend can store: rename the key"
            )
        return {k: _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same text. An ``Embedding`` or a
    numpy value is written as the list or number it holds."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_json_default
    )


def _json_default(value: Any) -> Any:
    plain = _plain(value)
    if plain is value:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return plain


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and objects, counted without recursion; stops past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def validate_metadata(metadata: object, *, record_id: str, max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """Return a clean JSON-object copy of ``metadata`` or raise ConfigError naming the problem."""
    if not isinstance(metadata, Mapping):
        raise ConfigError(
            f"metadata of record {record_id!r} is a {type(metadata).__name__}, not a JSON object: "
            "pass a dict such as {'kind': 'note'}"
        )
    if _depth(metadata, max_depth) > max_depth:
        raise ConfigError(
            f"metadata of record {record_id!r} nests more than {max_depth} levels deep: flatten it, or raise "
            "limits.max_metadata_depth"
        )
    try:
        cleaned = json.loads(canonical_json(_clean_json(metadata)))  # a deep, JSON-plain copy
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"metadata of record {record_id!r} cannot be encoded as JSON ({exc}): "
            "use strings, finite numbers, booleans, null, lists and objects with string keys"
        ) from None
    for key, kind in RESERVED_METADATA.items():
        value = cleaned.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise ConfigError(
                f"metadata {key!r} of record {record_id!r} is {value!r}; "
                f"it is reserved for a {kind.__name__} (the pipeline sets it)"
            )
    return dict(cleaned)


def validate_vector(vector: object, *, dimensions: int, collection: str, what: str = "embedding") -> list[float]:
    """Return ``vector`` as a list of floats, or raise ConfigError naming both sizes."""
    if isinstance(vector, str | bytes) or not isinstance(vector, (Sequence, *_array_types())):
        raise ConfigError(f"{what} must be a sequence of numbers, got {type(vector).__name__}")
    array = _float_array(vector)
    if array is not None:  # an Embedding or a float array: checked whole, ~10x faster than number by number
        import numpy

        return _checked(
            array.tolist(),
            finite=bool(numpy.isfinite(array).all()),
            dimensions=dimensions,
            collection=collection,
            what=what,
        )
    items: Sequence[Any] = vector  # type: ignore[assignment]
    try:
        values = [float(x) for x in items]
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must contain only numbers, got {list(items)[:5]!r}...") from None
    return _checked(
        values, finite=all(math.isfinite(x) for x in values), dimensions=dimensions, collection=collection, what=what
    )


def _checked(values: list[float], *, finite: bool, dimensions: int, collection: str, what: str) -> list[float]:
    if len(values) != dimensions:
        raise ConfigError(
            f"{what} has {len(values)} dimensions; collection {collection!r} expects {dimensions} (vectors.dimensions)"
        )
    if not finite:
        raise ConfigError(f"{what} for collection {collection!r} contains NaN or infinity")
    return values


def _float_array(vector: object) -> Any:
    """``vector`` as a one-row float numpy array when it is one already (an ndarray, an Embedding), else None."""
    if not hasattr(vector, "__array__"):
        return None
    import numpy

    array = numpy.asarray(vector)
    return array if array.ndim == 1 and array.dtype.kind == "f" else None


def _array_types() -> tuple[type, ...]:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy ships with every backend
        return ()
    return (numpy.ndarray,)


#: What a record id must be, said in every refusal of one.
ID_RULE = (
    "a record id is a non-empty string of at most limits.max_id_chars characters, without NUL characters "
    "or lone surrogates"
)


#: The longest quote of an id a refusal holds whole; a longer one is quoted by its first ``QUOTED_ID_CHARS``.
MAX_QUOTE_CHARS, QUOTED_ID_CHARS = 200, 40


def quoted_id(record_id: str) -> str:
    """``record_id`` as a message quotes it: its repr (which escapes a NUL or a surrogate, so the message can be
    stored and printed), by its beginning when long, so the rule after it is never cut off with the message."""
    whole = repr(record_id)
    if len(whole) <= MAX_QUOTE_CHARS:
        return whole
    return f"{record_id[:QUOTED_ID_CHARS]!r}... ({len(record_id)} characters)"


def check_record_id(record_id: str, *, max_chars: int = DEFAULT_MAX_ID_CHARS) -> str:
    """Return ``record_id`` if every backend and the state database can store it; else a ConfigError naming it
    (``quoted_id``) and the rule."""
    if not record_id or _UNSTORABLE.search(record_id):
        raise ConfigError(f"record id {quoted_id(record_id)} is not allowed: {ID_RULE}")
    return check_id_length(record_id, max_chars=max_chars)


def check_id_length(record_id: str, *, max_chars: int = DEFAULT_MAX_ID_CHARS) -> str:
    """Return ``record_id`` unless it is longer than ``max_chars``; then a ConfigError naming the cap."""
    if len(record_id) > max_chars:
        raise ConfigError(
            f"record id {record_id[:40]!r}... has {len(record_id)} characters, over limits.max_id_chars "
            f"({max_chars}): use a shorter id (a hash of the long one, for instance)"
        )
    return record_id


def validate_record(record: object, *, dimensions: int, collection: str) -> VectorRecord:
    """Check one record before anything is written; return a cleaned copy."""
    if not isinstance(record, VectorRecord):
        raise ConfigError(f"expected a VectorRecord, got {type(record).__name__}")
    if not isinstance(record.id, str) or not record.id or _UNSTORABLE.search(record.id):
        raise ConfigError(f"record id {record.id!r} is not allowed: use a non-empty string without NUL characters")
    return VectorRecord(
        id=record.id,
        embedding=validate_vector(
            record.embedding,
            dimensions=dimensions,
            collection=collection,
            what=f"embedding of record {record.id!r}",
        ),
        text=clean_text(str(record.text)),
        metadata=validate_metadata(record.metadata, record_id=record.id),
        model=clean_text(str(record.model)),
    )
