"""How the broker hands a task to a worker, told in one line by the broker's URL: the worker logs it as it
starts and ``vectorsync doctor`` shows it, so a deployment never gets a weaker delivery without a word."""

from __future__ import annotations

from dataclasses import dataclass

from store.connect.redis_urls import parse_redis_url, redis_form
from store.settings.urls import without_credentials

__all__ = ["Handover", "handover"]

_FORMS = {"tcp": "TCP", "tls": "TLS", "socket": "a Unix socket"}


@dataclass(frozen=True)
class Handover:
    """``safe``: a task is never in neither place, whatever the broker does as it hands one over; ``line``
    for the worker's log, ``summary`` for doctor's column."""

    safe: bool
    line: str
    summary: str


def handover(url: str) -> Handover:
    """The handover of a broker at ``url``. For a Redis broker this imports ``store.transport.redis``, which
    checks the installed kombu: UnsupportedKombu (a ConfigError) when it is not one the transport supports."""
    shown = without_credentials(url.split(";")[0])
    form = redis_form(url)
    if form is not None:
        import store.transport.redis  # noqa: F401 - checks kombu's names as it is imported

        where = _FORMS.get(form) or f"the master Sentinel names {parse_redis_url(url).master_name!r}"
        line = (f"broker {shown}: Redis over {where}; each task is taken and recorded as unacknowledged in one "
                "step, so none is lost as the broker goes away")  # fmt: skip
        return Handover(True, line, f"{shown}: Redis over {where}, tasks taken atomically")
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("amqp", "amqps", "pyamqp"):
        line = f"broker {shown}: RabbitMQ; a task stays with the broker until the worker acks it"
        return Handover(True, line, f"{shown}: RabbitMQ, tasks acked by the broker")
    line = (f"broker {shown}: kombu's own {scheme!r} transport, which vectorsync does not test; a task handed "
            "over as the broker goes away may be lost (use Redis or RabbitMQ)")  # fmt: skip
    return Handover(False, line, f"{shown}: kombu's own {scheme!r} transport, untested: a task may be lost")
