"""The ONNX Runtime backend of the ``local`` provider: a sentence-transformers model exported once, offline.

Why: on CPU, ONNX Runtime runs all-MiniLM-L6-v2 faster than torch with the
same vectors (cosine 0.9999997 to torch's); with ``quantize`` (int8 weights)
faster still, the vectors moving a little (cosine ~0.99).

Export: ``torch.onnx`` traces the model folder's own weights (no hub, no
Optimum: the sentence-transformers ``backend="onnx"`` route needs optimum-onnx,
which pins an older transformers) into one graph of the transformer, mean
pooling and L2 normalisation. It is written to a cache folder named by a
fingerprint of the model's files (``$VECTORSYNC_ONNX_CACHE``, else
``$XDG_CACHE_HOME/vectorsync/onnx``, else ``~/.cache/vectorsync/onnx``), so
a changed model exports again. Pool processes that load at once take turns
under a file lock, and a file appears only whole (written aside, then renamed).

Run: the model's ``tokenizer.json`` (tokenizers) and an ONNX Runtime session
with the process's thread budget (``store.calls.threads``); torch is imported only to
export. Texts are sorted by length and cut into batches of ``batch_size``, so
a batch pads its texts to nearly the same length; vectors come back in input
order. A model that is not a Transformer + mean Pooling (+ Normalize) folder
raises ``OnnxUnsupported``: the provider then runs it on torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EXPORT_VERSION", "OnnxEncoder", "OnnxUnsupported", "cache_root", "length_batches"]

#: Bump when the exported graph changes, so cached exports are made again.
EXPORT_VERSION = 1
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OnnxUnsupported(Exception):
    """This model cannot run on the ONNX backend here (why in the message); torch can."""


def cache_root() -> Path:
    """Where exports are kept: ``$VECTORSYNC_ONNX_CACHE``, else the user's cache folder."""
    named = os.environ.get("VECTORSYNC_ONNX_CACHE")
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vectorsync" / "onnx"


def length_batches(texts: list[str], batch_size: int) -> Iterator[list[int]]:
    """Indexes of ``texts``, longest first, in runs of ``batch_size``: each run pads to nearly one length."""
    order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


class OnnxEncoder:
    """One exported model in an ONNX Runtime session; ``encode`` gives L2-normalised vectors in input order."""

    def __init__(self, folder: str, *, threads: int, quantize: bool, batch_size: int) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise OnnxUnsupported(f"{exc.name} is not installed (pip install 'vectorsync[local]')") from None
        try:
            model_file, meta = ensure_export(Path(folder), quantize=quantize, threads=threads)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        except OnnxUnsupported:
            raise
        except ImportError as exc:  # torch, sentence-transformers or onnx, to export
            raise OnnxUnsupported(f"exporting needs {exc.name}, which is not installed") from None
        except OSError as exc:
            raise OnnxUnsupported(
                f"the export could not be written in {cache_root()} ({exc}); "
                "set VECTORSYNC_ONNX_CACHE to a writable folder"
            ) from None
        except Exception as exc:  # an architecture the tracer or ONNX Runtime cannot take: torch still can
            raise OnnxUnsupported(f"the export failed ({type(exc).__name__}: {exc})") from exc
        self._inputs = [name for name in meta["inputs"] if name in INPUTS]
        self._tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=meta["max_length"])
        self._tokenizer.enable_padding(pad_id=meta["pad_id"], pad_token=meta["pad_token"])
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        """One vector per text, in input order, computed in length-sorted batches."""
        vectors: list[Any] = [None] * len(texts)
        for batch in length_batches(texts, self.batch_size):
            for index, vector in zip(batch, self._run([texts[i] for i in batch]), strict=True):
                vectors[index] = vector
        return np.stack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feed = {name: np.asarray(columns[name], dtype=np.int64) for name in self._inputs}
        result: np.ndarray = self._session.run(None, feed)[0]
        return result


def ensure_export(folder: Path, *, quantize: bool, threads: int) -> tuple[Path, dict[str, Any]]:
    """The exported model file of ``folder`` (float, or int8 with ``quantize``) and its metadata; made if missing."""
    if not (folder / "modules.json").is_file() or not (folder / "tokenizer.json").is_file():
        raise OnnxUnsupported(f"{folder} is not a sentence-transformers folder with a tokenizer.json")
    target = cache_root() / f"{folder.name or 'model'}-{fingerprint(folder)}"
    fp32, int8, meta_file = target / "model.onnx", target / "model_int8.onnx", target / "vectorsync.json"
    wanted = int8 if quantize else fp32
    if not (wanted.is_file() and meta_file.is_file()):
        target.mkdir(parents=True, exist_ok=True)
        with _locked(target / ".lock"):
            if not (fp32.is_file() and meta_file.is_file()):
                _write_json(meta_file, _export(folder, fp32, threads=threads))
            if quantize and not int8.is_file():
                _quantize(fp32, int8)
    meta: dict[str, Any] = json.loads(meta_file.read_text())
    return wanted, meta


def fingerprint(folder: Path) -> str:
    """A short hash of the model folder's files (names, sizes, times) and of the export's version."""
    digest = hashlib.sha256(f"{EXPORT_VERSION}:{folder.resolve()}".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(json.dumps(data, indent=2))
    os.replace(aside, path)


def _export(folder: Path, target: Path, *, threads: int) -> dict[str, Any]:
    """Trace the model into ``target``; the metadata the encoder needs to feed it."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    transformer = _check_layout(model)
    tokenizer = model.tokenizer
    inputs = [name for name in INPUTS if name in tokenizer.model_input_names]
    # Two texts of different lengths: the traced graph must keep the padding mask (an unpadded sample could
    # trace the path that drops an all-ones mask).
    sample = tokenizer(["an example", "a slightly longer example text"], padding=True, return_tensors="pt")
    aside = target.with_name(f".{target.name}.{os.getpid()}")
    # The tracer warns about branches on shapes (padding, causal masks) that are constant for an encoder, and
    # that its exporter is the older one; the export's vectors are checked against torch's (tests).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _pooled_module(transformer.auto_model, inputs).eval(),
            tuple(sample[name] for name in inputs),
            str(aside),
            input_names=inputs,
            output_names=["sentence_embedding"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in inputs}, "sentence_embedding": {0: "batch"}},
        )
    os.replace(aside, target)
    return {
        "inputs": inputs,
        "max_length": int(model.max_seq_length),
        "pad_id": int(tokenizer.pad_token_id),
        "pad_token": str(tokenizer.pad_token),
        "export_version": EXPORT_VERSION,
    }


def _check_layout(model: Any) -> Any:
    """The model's Transformer module, if the model is Transformer + mean Pooling (+ Normalize); else raise."""
    kinds = [type(module).__name__ for module in model]
    pooling = getattr(model[1], "pooling_mode", None) if len(kinds) > 1 else None
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]) or pooling != "mean":
        raise OnnxUnsupported(
            f"its modules are {kinds} (pooling {pooling!r}); the ONNX export handles "
            "Transformer + mean Pooling (+ Normalize)"
        )
    return model[0]


def _quantize(source: Path, target: Path) -> None:
    """int8 weights, one scale per output channel (per-tensor scales cost too much accuracy on MiniLM)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    aside = target.with_name(f".{target.name}.{os.getpid()}")
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)
    try:
        quantize_dynamic(str(source), str(aside), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeFilter(_no_preprocessing_advice)
    os.replace(aside, target)


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    """Drop onnxruntime's advice to pre-process first (it is for static quantisation; this one is dynamic)."""
    return not record.getMessage().startswith("Please consider to run pre-processing")


def _pooled_module(transformer: Any, inputs: list[str]) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        """Transformer, mean over the real tokens, L2 norm: one graph, so ONNX Runtime fuses all of it."""

        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            features = dict(zip(inputs, tensors, strict=True))
            hidden = self.transformer(**features).last_hidden_state
            mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return Pooled()
