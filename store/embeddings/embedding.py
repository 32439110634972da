"""``Embedding``: one text's vector as a value, float32 like every store keeps it, with the model that made it.

It reads as a sequence of floats (``len``, iteration, indexing), so code written for lists keeps working;
``np.asarray(e)`` is its array without a copy; ``tolist()`` gives the plain floats JSON needs (task
arguments and metadata never carry the object itself).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, SupportsIndex, overload

import numpy as np
import numpy.typing as npt

from store.errors import ConfigError

__all__ = ["Embedding"]


class Embedding(Sequence[float]):
    """An immutable float32 vector and the model that made it (``""`` when unknown).

    Equal to an Embedding with the same values and model, and to a sequence of numbers with the same
    values at float32 precision (the precision it keeps). Unhashable, like the lists and arrays it stands for.
    """

    __slots__ = ("_array", "_model")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, vector: Sequence[float] | npt.ArrayLike, model: str = "") -> None:
        array = np.array(vector, dtype=np.float32)  # a copy: nobody else can change it
        if array.ndim != 1:
            raise ConfigError(f"an embedding is one row of numbers, got an array of shape {array.shape}")
        array.setflags(write=False)
        self._array = array
        self._model = str(model)

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        return int(self._array.shape[0])

    @property
    def vector(self) -> list[float]:
        """The values as a list of floats (what ``Embedding.vector`` was before it became a value)."""
        return self.tolist()

    def tolist(self) -> list[float]:
        """The values as Python floats: JSON-plain."""
        values: list[float] = self._array.tolist()
        return values

    def cosine(self, other: Sequence[float] | npt.ArrayLike) -> float:
        """Cosine similarity with ``other`` (an Embedding or numbers), from -1 to 1; 0.0 when either is all
        zeros. Raises ConfigError when the sizes differ."""
        theirs = np.asarray(other, dtype=np.float64)
        if theirs.shape != self._array.shape:
            raise ConfigError(
                f"cannot compare an embedding of {self.dimensions} dimensions with one of shape "
                f"{theirs.shape}: both must come from the same model"
            )
        mine = self._array.astype(np.float64)
        norms = float(np.linalg.norm(mine) * np.linalg.norm(theirs))
        return float(mine @ theirs) / norms if norms else 0.0

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        """The read-only float32 array itself; a copy only when asked for one, or for another dtype."""
        if copy:
            return self._array.astype(dtype or np.float32, copy=True)
        if dtype is None or np.dtype(dtype) == self._array.dtype:
            return self._array
        if copy is False:
            raise ValueError(f"an embedding is float32: converting it to {np.dtype(dtype)} needs a copy")
        return self._array.astype(dtype)

    def __len__(self) -> int:
        return self.dimensions

    def __iter__(self) -> Iterator[float]:
        return iter(self.tolist())

    @overload
    def __getitem__(self, index: SupportsIndex) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> list[float]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> float | list[float]:
        if isinstance(index, slice):
            part: list[float] = self._array[index].tolist()
            return part
        return float(self._array[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Embedding):
            return self._model == other._model and np.array_equal(self._array, other._array)
        if isinstance(other, str | bytes) or not isinstance(other, Sequence | np.ndarray):
            return NotImplemented
        try:
            theirs = np.asarray(other, dtype=np.float32)
        except (TypeError, ValueError):
            return False
        return theirs.shape == self._array.shape and bool(np.array_equal(self._array, theirs))

    def __repr__(self) -> str:
        shown = ", ".join(f"{value:.4g}" for value in self._array[:4].tolist())
        more = ", ..." if self.dimensions > 4 else ""
        return f"Embedding([{shown}{more}], dimensions={self.dimensions}, model={self._model!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Embedding, (self.tolist(), self._model))
