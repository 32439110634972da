"""The forms of Redis URL vectorsync takes, and what kombu (the broker) and redis-py (every other client) need
of each: one parse, so the broker, the cache and the locks reach the same server the same way.

========================  ==============================================================================
``redis://``              ``redis://[:PASSWORD@]HOST[:PORT][/DB]``
``rediss://`` (TLS)       ``rediss://HOST:PORT/DB?ssl_ca_certs=/path/ca.pem``; the server's certificate is
                          verified unless ``ssl_cert_reqs=none`` says otherwise (``ssl_certfile`` and
                          ``ssl_keyfile`` for a client certificate, ``ssl_check_hostname=false``)
``redis+socket://``       ``redis+socket:///run/redis.sock?db=DB`` (kombu's form; ``unix://`` is taken too)
``sentinel://``           ``sentinel://HOST:PORT[;sentinel://HOST:PORT...]/DB?master_name=NAME``
========================  ==============================================================================
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from store.errors import ConfigError

__all__ = ["KombuBroker", "RedisUrl", "kombu_broker", "parse_redis_url", "redis_form"]

Form = Literal["tcp", "tls", "socket", "sentinel"]

_FORMS: dict[str, Form] = {
    "redis": "tcp",
    "rediss": "tls",
    "redis+socket": "socket",
    "unix": "socket",
    "sentinel": "sentinel",
}
#: The TLS options a ``rediss://`` URL may carry (redis-py's names, which kombu takes too).
_TLS_KEYS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname", "ssl_ca_path")
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
#: The transports of ``store.transport.redis``, by form: each takes a message and records it in one step.
_TRANSPORTS: dict[Form, str] = {
    "tcp": "store.transport.redis:Transport",
    "tls": "store.transport.redis:Transport",
    "socket": "store.transport.redis:SocketTransport",
    "sentinel": "store.transport.redis:SentinelTransport",
}


def redis_form(url: str) -> Form | None:
    """Which form of Redis URL ``url`` is; None for any other URL (a RabbitMQ broker's, say)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    return _FORMS.get(scheme)


@dataclass(frozen=True)
class RedisUrl:
    """A Redis URL taken apart: where the server is, which database, the credentials and the TLS options."""

    form: Form
    db: int = 0
    #: (host, port) of the server, or of each Sentinel; empty for a socket.
    hosts: tuple[tuple[str, int], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = None
    master_name: str = ""
    #: redis-py's TLS keyword arguments (``ssl_cert_reqs`` as an ``ssl.VerifyMode``); empty but for ``tls``.
    tls: dict[str, Any] = field(default_factory=dict)

    def client_options(self) -> dict[str, Any]:
        """redis-py's keyword arguments for the credentials (and TLS options) of this server, or of a
        Sentinel's master; only those given."""
        options: dict[str, Any] = {"username": self.username, "password": self.password}
        if self.form == "tls":
            options |= {"ssl": True, **self.tls}
        return {key: value for key, value in options.items() if value is not None}


def parse_redis_url(url: str) -> RedisUrl:
    """``url`` taken apart; a ConfigError naming the part that is wrong and the form it should have."""
    form = redis_form(url)
    if form is None:
        raise ConfigError(f"{url.split('://', 1)[0]}:// is not a Redis URL: use redis://, rediss://, "
                          "redis+socket:// or sentinel://")  # fmt: skip
    parts = [urlsplit(part) for part in url.split(";")]
    last = parts[-1]
    query = dict(parse_qsl(last.query, keep_blank_values=True))
    if form == "socket":
        return RedisUrl("socket", db=_db(query.pop("db", query.pop("virtual_host", "0")), url),
                        path=unquote(last.path), password=_password(last), username=_user(last))  # fmt: skip
    db = _db(last.path.strip("/") or "0", url)
    hosts = tuple((part.hostname or "127.0.0.1", _port(part, form, url)) for part in parts)
    if form == "sentinel":
        master = query.pop("master_name", "")
        if not master:
            raise ConfigError("a sentinel:// URL names its master: add ?master_name=NAME (the name in the "
                              "Sentinels' `sentinel monitor` line)")  # fmt: skip
        _no_other_options(query, url, "master_name")
        first = parts[0]
        return RedisUrl("sentinel", db, hosts, master_name=master, username=_user(first), password=_password(first))
    tls = _tls_options(query, url) if form == "tls" else {}
    return RedisUrl(form, db, hosts[:1], username=_user(last), password=_password(last), tls=tls)


@dataclass(frozen=True)
class KombuBroker:
    """What Celery is given for a Redis broker: kombu's URL, the transport, its options and its TLS options."""

    url: str
    transport: str
    transport_options: dict[str, Any]
    use_ssl: dict[str, Any] | None


def kombu_broker(url: str) -> KombuBroker:
    """The broker configuration of a Redis URL, through ``store.transport.redis`` in every form.

    kombu takes the TLS options from Celery's ``broker_use_ssl`` here (it sets none for a transport given by
    name), its socket form as ``socket://`` with the socket transport (``redis+socket://`` would pick kombu's
    own transport whatever Celery names), and a Sentinel's master name as a transport option."""
    parsed = parse_redis_url(url)
    transport = _TRANSPORTS[parsed.form]
    userinfo = _userinfo(url.split(";")[0])
    if parsed.form == "socket":
        socket_url = f"socket://{parsed.path}?{urlencode({'virtual_host': parsed.db})}"
        return KombuBroker(socket_url, transport, {}, None)
    if parsed.form == "sentinel":
        hosts = ";".join(f"sentinel://{userinfo}{_netloc(h, p)}/{parsed.db}" for h, p in parsed.hosts)
        return KombuBroker(hosts, transport, {"master_name": parsed.master_name}, None)
    if parsed.form == "tcp":
        return KombuBroker(url, transport, {}, None)
    host, port = parsed.hosts[0]
    return KombuBroker(f"rediss://{userinfo}{_netloc(host, port)}/{parsed.db}", transport, {}, dict(parsed.tls))


def _tls_options(query: dict[str, str], url: str) -> dict[str, Any]:
    _no_other_options(query, url, *_TLS_KEYS)
    options: dict[str, Any] = {key: value for key, value in query.items() if key in _TLS_KEYS}
    reqs = options.get("ssl_cert_reqs", "required").lower()
    if reqs not in _CERT_REQS:
        raise ConfigError(f"ssl_cert_reqs={reqs!r} in the Redis URL: use required, optional or none")
    options["ssl_cert_reqs"] = _CERT_REQS[reqs]
    if "ssl_check_hostname" in options:
        options["ssl_check_hostname"] = options["ssl_check_hostname"].lower() not in ("false", "0", "no")
    return options


def _no_other_options(query: dict[str, str], url: str, *allowed: str) -> None:
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"{scheme}:// URL option {unknown[0]!r} is not one vectorsync takes: use "
                          + (", ".join(allowed) or "none"))  # fmt: skip


def _db(value: str, url: str) -> int:
    if not value.isdigit():
        raise ConfigError(f"Redis database {value!r} in {url.split('://', 1)[0]}:// URL: use a number, e.g. /0")
    return int(value)


def _port(part: Any, form: Form, url: str) -> int:
    try:
        port = part.port
    except ValueError:
        raise ConfigError(f"the port of a {form} Redis URL is not a number: {part.netloc.rsplit('@', 1)[-1]}") from None
    return int(port or (26379 if form == "sentinel" else 6379))


def _user(part: Any) -> str | None:
    return unquote(part.username) if part.username else None


def _password(part: Any) -> str | None:
    return unquote(part.password) if part.password is not None else None


def _userinfo(url: str) -> str:
    netloc = urlsplit(url).netloc
    return netloc.rsplit("@", 1)[0] + "@" if "@" in netloc else ""


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
