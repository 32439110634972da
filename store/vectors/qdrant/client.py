"""Talking to qdrant-client: its errors translated, so no caller ever sees a driver exception."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from store.errors import StoreError, StoreUnavailable, VectorsyncError

__all__ = ["driver_errors", "is_server", "translated"]


@cache
def driver_errors() -> tuple[type[BaseException], ...]:
    """The exceptions qdrant-client and its transports raise; ValueError is local mode's 'not found'."""
    import httpx
    from qdrant_client.common.client_exceptions import QdrantException
    from qdrant_client.http.exceptions import ApiException

    errors: list[type[BaseException]] = [ApiException, QdrantException, httpx.HTTPError, OSError, ValueError]
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio ships with qdrant-client
        pass
    else:
        errors.append(grpc.RpcError)
    return tuple(errors)


@contextmanager
def translated(where: str, what: str) -> Iterator[None]:
    """Turn driver errors into StoreUnavailable, so no caller sees qdrant-client exceptions."""
    try:
        yield
    except VectorsyncError:
        raise
    except driver_errors() as exc:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
            raise StoreError(f"Qdrant at {where} refused to {what}: {exc}") from exc  # retrying will not help
        raise StoreUnavailable(f"Qdrant at {where} failed to {what}: {exc}") from exc


def is_server(url: str) -> bool:
    return url.startswith(("http://", "https://"))
