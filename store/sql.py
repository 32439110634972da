"""SQL connection helpers shared by the pgvector backend and the state database."""

from __future__ import annotations

import re

import sqlalchemy as sa

__all__ = ["engine_url", "safe_url"]


def engine_url(url: str) -> str:
    """Point a plain ``postgresql://`` URL at psycopg 3, SQLAlchemy's default being psycopg2."""
    return re.sub(r"^(postgres|postgresql)(\+psycopg2?)?://", "postgresql+psycopg://", url)


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return sa.engine.make_url(engine_url(url)).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"
