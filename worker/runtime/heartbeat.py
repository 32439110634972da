"""The worker's event heartbeat (``worker-heartbeat``, for Flower), with a publish that gives up.

Celery's heartbeat publishes with ``retry=True`` and no retry policy, which kombu takes as "retry forever":
a broker gone silent held the worker's main process in that publish (measured: the whole of a 30 s cut, and
past its end), so it acked nothing, handed its pool nothing, fired no time limit and logged nothing. Here the
heartbeat reconnects once and then gives up until its next beat (Celery buffers the event meanwhile), says
so once in the log, and says so again when the broker takes a heartbeat again. The worker's consumer uses
this in place of Celery's (``worker_consumer`` in ``worker.runtime.app``).
"""

from __future__ import annotations

import logging
from typing import Any

from celery.utils.sysinfo import load_average
from celery.worker import heartbeat
from celery.worker.consumer import Consumer as CeleryConsumer
from celery.worker.consumer.heart import Heart as CeleryHeartStep
from celery.worker.state import SOFTWARE_INFO, active_requests, all_total_count

__all__ = ["HEARTBEAT_RETRY_POLICY", "BoundedHeart", "Consumer"]

log = logging.getLogger(__name__)

#: One reconnect, at once, then the beat is dropped until the next one (every 2 s): a beat waits at most two
#: connection attempts (``network.connect_timeout``) and a write (``broker.socket_timeout``).
HEARTBEAT_RETRY_POLICY: dict[str, Any] = {"max_retries": 1, "interval_start": 0, "interval_step": 1, "interval_max": 1}


class BoundedHeart(heartbeat.Heart):
    """Celery's heartbeat timer, its publish bounded by ``HEARTBEAT_RETRY_POLICY`` (module docstring)."""

    def __init__(self, timer: Any, eventer: Any, interval: float | None = None) -> None:
        super().__init__(timer, eventer, interval)
        self.failing = False

    def _send(self, event: str, retry: bool = True) -> Any:
        # Celery's _send, but for the retry policy and the two log lines. The dispatcher keeps an event it could
        # not publish in its buffer (buffer_while_offline) rather than raise: that it grew says the beat failed.
        if self._send_sent_signal is not None:
            self._send_sent_signal(sender=self)
        errors: list[BaseException] = []
        policy = {**HEARTBEAT_RETRY_POLICY, "errback": lambda exc, _interval: errors.append(exc)}
        buffered = len(getattr(self.eventer, "_outbound_buffer", ()))
        sent = self.eventer.send(
            event,
            freq=self.interval,
            active=len(active_requests),
            processed=all_total_count[0],
            loadavg=load_average(),
            retry=retry,
            retry_policy=policy,
            **SOFTWARE_INFO,
        )
        failed = len(getattr(self.eventer, "_outbound_buffer", ())) > buffered
        if failed and not self.failing:
            error = f"{type(errors[-1]).__name__}: {errors[-1]}" if errors else "no reply"
            log.warning(
                "the broker did not take the worker's heartbeat (%s); trying again every %.0f s", error, self.interval
            )
        elif not failed and self.failing:
            log.info("the broker takes the worker's heartbeat again")
        self.failing = failed
        return sent


class BoundedHeartStep(CeleryHeartStep):
    """The consumer's heartbeat step, starting a ``BoundedHeart``. The consumer restarts its steps when its
    connection comes back; whether the beats were failing carries over, so the recovery is logged once."""

    failing = False

    def start(self, c: Any) -> None:
        c.heart = BoundedHeart(c.timer, c.event_dispatcher, self.heartbeat_interval)
        c.heart.failing = self.failing
        c.heart.start()

    def stop(self, c: Any) -> None:
        if c.heart is not None:
            self.failing = c.heart.failing
        super().stop(c)

    shutdown = stop


_CELERY_STEP = "celery.worker.consumer.heart:Heart"


class Consumer(CeleryConsumer):
    """Celery's consumer, with ``BoundedHeartStep`` in place of its heartbeat step."""

    class Blueprint(CeleryConsumer.Blueprint):
        default_steps = [
            f"{__name__}:BoundedHeartStep" if step == _CELERY_STEP else step
            for step in CeleryConsumer.Blueprint.default_steps
        ]
