"""``Embedding``, the value ``embed`` and ``embed_many`` return: a float32 vector with its model, that reads as
a list of floats, converts to numpy without a copy and to JSON through ``tolist()``."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pytest
from kombu import serialization

from store import ConfigError, VectorRecord
from store.embeddings import Embedding, Embeddings
from store.embeddings.providers.fake import hash_embed
from store.settings import Settings
from store.vectors.backends import memory_store
from store.vectors.records import canonical_json, validate_metadata


@pytest.fixture(scope="module")
def embeddings() -> Embeddings:
    return Embeddings.from_settings(
        Settings.model_validate({"vectors": {"dimensions": 32}, "embeddings": {"cache_ttl_days": 0}})
    )


def test_embed_and_embed_many_return_embeddings_with_their_model(embeddings: Embeddings) -> None:
    one = embeddings.embed("renewal call")
    many = embeddings.embed_many(["renewal call", "invoice paid"])
    assert isinstance(one, Embedding) and all(isinstance(e, Embedding) for e in many)
    assert (one.dimensions, one.model) == (32, "fake")
    assert many[0] == one
    assert one == hash_embed("renewal call", 32)  # a list of the same values, at float32 precision


def test_it_reads_as_a_sequence_of_python_floats() -> None:
    e = Embedding([0.5, -0.25, 1.0, 0.0], "m")
    assert isinstance(e, Sequence) and len(e) == 4
    assert list(e) == e.tolist() == e.vector == [0.5, -0.25, 1.0, 0.0]
    assert all(type(x) is float for x in [*e, e[0], e[-1]])
    assert (e[1], e[1:3], e.index(1.0), 1.0 in e) == (-0.25, [-0.25, 1.0], 2, True)
    assert json.dumps(e.tolist()) == "[0.5, -0.25, 1.0, 0.0]"


def test_numpy_sees_the_array_itself_and_cannot_change_it() -> None:
    e = Embedding([0.1, 0.2, 0.3])
    array = np.asarray(e)
    assert array.dtype == np.float32 and array is np.asarray(e)  # no copy
    with pytest.raises(ValueError, match="read-only"):
        array[0] = 9.0
    assert np.asarray(e, dtype=np.float64).dtype == np.float64
    mutable = np.array(e)  # a copy when asked for one
    mutable[0] = 9.0
    assert e[0] == pytest.approx(0.1)
    source = np.array([1.0, 2.0], dtype=np.float32)
    copied = Embedding(source)
    source[0] = 5.0
    assert copied[0] == 1.0  # the value owns its numbers
    assert np.array_equal(np.stack([e, e]), np.asarray([e.tolist(), e.tolist()], dtype=np.float32))


def test_cosine_and_equality() -> None:
    a, b = Embedding([1.0, 0.0], "m"), Embedding([0.0, 2.0], "m")
    assert (a.cosine(a), a.cosine(b), a.cosine([-3.0, 0.0])) == (1.0, 0.0, -1.0)
    assert a.cosine(Embedding([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    assert Embedding([0.0, 0.0]).cosine(a) == 0.0
    with pytest.raises(ConfigError, match="2 dimensions"):
        a.cosine([1.0, 0.0, 0.0])
    assert a == Embedding([1.0, 0.0], "m") and a != Embedding([1.0, 0.0], "other") and a != b
    assert a == [1.0, 0.0] and a == np.array([1.0, 0.0]) and a != [1.0, 0.0, 0.0] and a != "ab"
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(ConfigError, match="one row"):
        Embedding([[1.0, 0.0]])


def test_json_paths_carry_its_numbers_never_the_object() -> None:
    e = Embedding([0.5, 0.25], "m")
    with pytest.raises(serialization.EncodeError):  # a task argument must be plain JSON: pass e.tolist()
        serialization.dumps([e], serializer="json")
    content_type, encoding, body = serialization.dumps([e.tolist()], serializer="json")
    assert serialization.loads(body, content_type, encoding, accept=[content_type]) == [[0.5, 0.25]]
    assert validate_metadata({"probe": e, "weight": np.float32(0.5)}, record_id="r") == {
        "probe": [0.5, 0.25],
        "weight": 0.5,
    }
    assert canonical_json({"v": e}) == '{"v":[0.5,0.25]}'


def test_stores_and_searches_take_it_as_a_vector(embeddings: Embeddings) -> None:
    store = memory_store(dimensions=32, embedder=embeddings)
    notes = store.get_collection("notes", create=True)
    notes.upsert(VectorRecord("a", embeddings.embed("pricing for the annual plan"), "pricing"))
    notes.upsert(VectorRecord("b", embeddings.embed("onboarding schedule slipped"), "onboarding"))
    assert notes.search(embeddings.embed("onboarding schedule"), limit=1)[0].id == "b"
