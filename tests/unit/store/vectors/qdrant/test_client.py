"""qdrant-client's errors translated: a server down is StoreUnavailable, a refusal StoreError, neither naming a
key or a password."""

from __future__ import annotations

import pytest

pytest.importorskip("qdrant_client")

from store.errors import ConfigError, StoreError, StoreUnavailable
from store.vectors.qdrant import QdrantStore
from tests.services import free_port


def test_an_unreachable_server_is_store_unavailable_and_the_key_is_not_shown() -> None:
    url = f"https://127.0.0.1:{free_port()}"
    store = QdrantStore(url, dimensions=2, api_key="s3cret-key")
    with pytest.raises(StoreUnavailable, match=rf"^Qdrant at {url} failed to open collection 'notes'") as caught:
        store.get_collection("notes", create=True)
    assert "s3cret-key" not in str(caught.value)
    assert caught.value.__cause__ is not None
    store.close()


def test_user_and_password_in_the_url_are_not_shown() -> None:
    port = free_port()
    store = QdrantStore(f"http://admin:hunter2@127.0.0.1:{port}", dimensions=2)
    assert store.url == f"http://127.0.0.1:{port}"
    with pytest.raises(StoreUnavailable) as caught:
        store.list_collections()
    assert "hunter2" not in str(caught.value)
    store.close()


def test_a_refusal_is_a_store_error_and_a_failure_store_unavailable() -> None:
    from qdrant_client.http.exceptions import UnexpectedResponse

    from store.vectors.qdrant.client import is_server, translated

    refused = UnexpectedResponse(400, "Bad Request", b"{}", None)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="^Qdrant at q refused to search: ") as caught, translated("q", "search"):
        raise refused
    assert not isinstance(caught.value, StoreUnavailable) and caught.value.__cause__ is refused
    with pytest.raises(StoreUnavailable, match="^Qdrant at q failed to search: "), translated("q", "search"):
        raise UnexpectedResponse(429, "Too Many Requests", b"{}", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError), translated("q", "search"):  # ours pass through
        raise ConfigError("bad")
    assert is_server("https://q:6333") and not is_server(":memory:") and not is_server("/data/qdrant")
