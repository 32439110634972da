"""The bundled local model itself (all-MiniLM-L6-v2, loaded from its package, offline): sorted batches give
each text its own vector on both backends, int8 stays close to float, and meaning survives.

Loading the model is a real part's cost (half a minute here), so these run with the integration tests."""

from __future__ import annotations

import numpy as np
import pytest

from store.embeddings.providers import local
from store.embeddings.providers.local import LocalProvider
from store.settings import ModelSettings
from tests.unit.store.embeddings.providers.test_fake import cosine
from tests.unit.store.embeddings.providers.test_local import minilm
from tests.unit.store.embeddings.providers.test_onnx import TEXTS

# The model loads once for the module (``reference``): its tests stay on one xdist worker.
pytestmark = [pytest.mark.local_model, pytest.mark.xdist_group("local-model")]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """Each text encoded alone by sentence-transformers as it comes: no padding, no sorting."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(local.model_location("all-MiniLM-L6-v2"), device="cpu")
    return np.stack([model.encode([text], normalize_embeddings=True)[0] for text in TEXTS])


@pytest.mark.local_model
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_sorted_batches_give_each_text_its_own_vector(
    backend: str,
    reference: np.ndarray,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    monkeypatch.setenv("VECTORSYNC_ONNX_CACHE", str(tmp_path_factory.getbasetemp() / "onnx"))
    monkeypatch.setattr(local, "ENCODE_BATCH", 2)  # several sorted batches out of a handful of texts
    provider = LocalProvider(name="m", settings=minilm(backend=backend, threads=1))
    vectors = np.array(provider.embed_batch(TEXTS))
    assert type(provider._loaded).__name__ == ("OnnxEncoder" if backend == "onnx" else "_TorchEncoder")
    assert vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(vectors, reference, atol=2e-4)


@pytest.mark.local_model
def test_int8_vectors_stay_close_to_the_float_ones(
    reference: np.ndarray, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("VECTORSYNC_ONNX_CACHE", str(tmp_path_factory.getbasetemp() / "onnx"))
    vectors = np.array(LocalProvider(name="m", settings=minilm(quantize=True, threads=1)).embed_batch(TEXTS))
    cosines = (vectors * reference).sum(axis=1)
    assert cosines.mean() > 0.98 and cosines.min() > 0.9  # least for a text of one word ("ok": 0.95)


@pytest.mark.local_model
def test_local_model_embeds_meaning_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # before the import: huggingface_hub reads it once
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    settings = ModelSettings(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
    provider = LocalProvider(name="local", settings=settings)
    question, worry, invoice = provider.embed_batch(
        [
            "Dana asked whether onboarding takes more than a month",
            "the customer is worried about rollout time",
            "the invoice was paid in full",
        ]
    )
    assert len(question) == 384
    assert cosine(question, worry) > cosine(question, invoice)
