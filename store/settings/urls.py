"""URLs as messages and logs may show them: never a password, a key or a token."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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


#: Query parameters that carry a secret (``?password=``, ``?api_key=``...): their values are hidden.
_SECRET_PARAMS = ("password", "passwd", "pwd", "key", "token", "secret", "sslpassword")


def _hidden_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v) for k, v in pairs], safe="*/")


def without_credentials(url: str) -> str:
    """``url`` without ``user:password@`` and with secret query parameters hidden; a location that is not
    a URL comes back as it is."""
    try:
        parts = urlsplit(url)
        if "://" not in url:  # a path, or user:password@host: not a URL to take apart
            return url if "@" not in url and "password" not in url.lower() else "<URL with credentials>"
        if parts.hostname:
            return urlunsplit((parts.scheme, _host(url), parts.path, _hidden_query(parts.query), parts.fragment))
        # No host (a Unix socket's URL: postgresql://app@/db?host=/run/pg): shown too, without its user info.
        query = f"?{_hidden_query(parts.query)}" if parts.query else ""
        return f"{parts.scheme}://{parts.path}{query}" + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:
        return "<unparseable URL>"
