"""Opening a pgvector store: an unreachable or malformed database URL is told without its password."""

from __future__ import annotations

import pytest

from store import ConfigError
from store.vectors.pgvector import PgvectorStore


def test_unreachable_database_is_store_unavailable_without_the_password() -> None:
    from store import StoreUnavailable

    with pytest.raises(StoreUnavailable) as error:
        PgvectorStore("postgresql://app:s3cret@127.0.0.1:1/nowhere", dimensions=4)
    assert "s3cret" not in str(error.value)
    assert "127.0.0.1:1" in str(error.value)


def test_a_malformed_database_url_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError, match="vectors.url = .* is not a usable database URL") as error:
        PgvectorStore("postgresql://app:s3cret@db:notaport/x", dimensions=4)
    assert "s3cret" not in str(error.value)
