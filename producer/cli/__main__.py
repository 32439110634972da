"""``python -m producer.cli``: the ``vectorsync`` command."""

from producer.cli.app import main

main()
