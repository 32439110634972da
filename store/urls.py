"""URLs as messages and logs may show them: never a password, a key or a token."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact_url", "without_credentials"]


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def redact_url(url: str) -> str:
    """``url`` without user info, query or fragment: an API endpoint, for messages."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, _host(url), parts.path.rstrip("/"), "", ""))


def without_credentials(url: str) -> str:
    """``url`` without ``user:password@``; a location that is not a URL comes back as it is."""
    try:
        parts = urlsplit(url)
        if not parts.hostname:
            return url if "@" not in url else "<URL with credentials>"
        return urlunsplit((parts.scheme, _host(url), parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparseable URL>"
