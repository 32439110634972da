"""promtool, from Debian's ``prometheus`` package: on PATH, else taken out of the package into a cache folder.

The package is fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` rather than installed:
installing it would also start a Prometheus server on port 9090 on this machine, and promtool is one
binary that needs only libc. Where apt-get cannot fetch it (no apt, no network, not root for ``apt-get update``),
the tests that need it skip, saying so.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["PACKAGE", "promtool_path"]

#: The Debian package promtool comes in.
PACKAGE = "prometheus"
#: Where the unpacked package is kept between runs.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vectorsync-tests" / "promtool"
SKIP = (
    "promtool is not on PATH and could not be taken from Debian's prometheus package ({why}): install it "
    "with `apt-get install prometheus` (as root), or put promtool on PATH"
)


def _run(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def _fetch(folder: Path) -> Path:
    """Download and unpack the package into ``folder``; promtool's path. Raises RuntimeError saying why not."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise RuntimeError("no apt-get or dpkg-deb here")
    with tempfile.TemporaryDirectory() as scratch:
        got = _run("apt-get", "download", PACKAGE, cwd=Path(scratch))
        if got.returncode != 0 and os.geteuid() == 0:  # the package lists may be missing or stale
            _run("apt-get", "update", "-q")
            got = _run("apt-get", "download", PACKAGE, cwd=Path(scratch))
        debs = sorted(Path(scratch).glob(f"{PACKAGE}_*.deb"))
        if got.returncode != 0 or not debs:
            raise RuntimeError(f"apt-get download {PACKAGE} failed: {(got.stderr or got.stdout).strip()[-300:]}")
        unpacked = Path(scratch) / "root"
        result = _run("dpkg-deb", "-x", str(debs[-1]), str(unpacked))
        binary = unpacked / "usr" / "bin" / "promtool"
        if result.returncode != 0 or not binary.is_file():
            raise RuntimeError(f"dpkg-deb -x found no usr/bin/promtool: {result.stderr.strip()[-300:]}")
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "promtool"
        shutil.copy2(binary, target.with_suffix(".part"))
        os.replace(target.with_suffix(".part"), target)  # atomic: another process never runs half a binary
    return target


def promtool_path() -> str:
    """promtool's path; skips the calling test when there is none and none can be fetched."""
    found = shutil.which("promtool")
    if found:
        return found
    cached = CACHE / "promtool"
    if not cached.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / ".lock", "w") as lock:  # xdist workers fetch it once between them
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cached.is_file():
                try:
                    _fetch(CACHE)
                except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                    pytest.skip(SKIP.format(why=exc))
    version = _run(str(cached), "--version")
    if version.returncode != 0:
        pytest.skip(SKIP.format(why=f"{cached} does not run: {version.stderr.strip()[-300:]}"))
    return str(cached)
