"""store/transport/kombu_names.py against a live kombu: the names a channel and its QoS set on themselves as a
channel opens (``INSTANCE``), which no import-time check can see, and a worker on a kombu without a name refusing
to start in one line."""

from __future__ import annotations

from pathlib import Path

from tests.integration.store.transport.channels import connect


def test_an_open_channel_has_every_name_the_transport_reads(tcp_server: str) -> None:
    """The names kombu's channel and its QoS set on themselves as it opens (``kombu_names.INSTANCE``), which no
    import-time check can see."""
    from store.transport.kombu_names import INSTANCE

    with connect(tcp_server) as connection:
        channel = connection.default_channel
        opened = {"Channel": channel, "QoS": channel.qos}
        assert [name for name in INSTANCE if not hasattr(opened[name.split(".")[0]], name.split(".")[1])] == []
        assert callable(channel._queue_cycle.consume) and callable(channel._queue_cycle.rotate)
        assert channel.qos.channel is channel


def test_a_worker_on_a_kombu_without_a_name_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    """kombu 5.5 and 5.6 lack ``_flush_brpop_reauth`` (and four more names): a worker there died at once with
    tracebacks. Here that kombu is made by deleting the name before ``celery -A worker worker`` starts."""
    import subprocess
    import sys

    from tests.workers import ROOT, process_env

    config = tmp_path / "vectorsync.toml"
    config.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n')
    start = (
        "import sys, kombu.transport.redis as r; del r.Channel._flush_brpop_reauth; "
        "from celery.__main__ import main; sys.argv = ['celery', '-A', 'worker', 'worker']; main()"
    )
    ran = subprocess.run(
        [sys.executable, "-c", start], cwd=ROOT, env=process_env(config), capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 1 and ran.stdout == "", ran
    import kombu

    assert ran.stderr.strip().splitlines() == [
        f"vectorsync worker refused to start: kombu {kombu.__version__} is not one vectorsync's Redis transport "
        "supports (Channel._flush_brpop_reauth is missing): install kombu>=5.7,<5.8, "
        "e.g. pip install 'kombu[redis]>=5.7,<5.8'"
    ]
