"""Start Flower only behind a login: ``python -m worker.flower [flower options]``.

Flower's API can enqueue any task by name, a full reindex that empties a
collection included: access to Flower is write access to the index. So it
starts only when ``FLOWER_BASIC_AUTH`` (user:password, comma-separated for
several) or ``FLOWER_AUTH`` (OAuth) is set, and never with the example's
placeholder password.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["PLACEHOLDER", "login_problem", "main"]

#: The password the example files show; a real deployment replaces it.
PLACEHOLDER = "change-me"


def login_problem(env: Mapping[str, str]) -> str | None:
    """Why Flower must not start with this environment, or None when its login is set."""
    basic, oauth = env.get("FLOWER_BASIC_AUTH", "").strip(), env.get("FLOWER_AUTH", "").strip()
    if not basic and not oauth:
        return ("Flower has no login: set FLOWER_BASIC_AUTH=user:password (deploy/.env, or the Kubernetes "
                "Secret). Its API can enqueue any task, so access to it is write access to the index")
    pairs = [pair for pair in basic.split(",") if pair]
    if any(":" not in pair or not pair.split(":", 1)[1] for pair in pairs):
        return "FLOWER_BASIC_AUTH must be user:password pairs, comma-separated, each with a password"
    if any(pair.split(":", 1)[1] == PLACEHOLDER for pair in pairs):
        return f"FLOWER_BASIC_AUTH still has the example's password {PLACEHOLDER!r}: choose a real one"
    return None


def main(argv: Sequence[str]) -> int:
    problem = login_problem(os.environ)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    os.execvp(sys.executable, [sys.executable, "-m", "celery", "-A", "worker", "flower", *argv])
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
