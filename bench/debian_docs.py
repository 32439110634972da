"""Debian's documentation packages, fetched and unpacked without root into the bench's work folder.

``apt-get download`` fetches a package's .deb into the current folder (no root: nothing is installed) and
``dpkg-deb -x`` unpacks it; both are kept, so a second run reads the folder and fetches nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["PACKAGES", "unpacked", "work_dir"]

#: The packages the labelled sets are built from.
PACKAGES = ("debian-faq", "git-doc")
#: The bench's work folder unless VECTORSYNC_BENCH_WORK names another: caches that outlive a run.
DEFAULT_WORK = Path(__file__).resolve().parent / ".work"


def work_dir() -> Path:
    """The bench's work folder (``VECTORSYNC_BENCH_WORK``, else ``bench/.work``), created if missing."""
    folder = Path(os.environ.get("VECTORSYNC_BENCH_WORK") or DEFAULT_WORK)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def unpacked(work: Path | None = None) -> Path:
    """The folder the packages are unpacked in (its ``usr/share/doc``), fetching what is missing."""
    cache = (work or work_dir()) / "debian"
    debs, root = cache / "debs", cache / "root"
    debs.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            _run(
                ["apt-get", "download", package],
                cwd=debs,
                fix=f"check the package exists (apt-cache policy {package}); run apt-get update once",
            )
            found = sorted(debs.glob(f"{package}_*.deb"))
        marker = root / f".{package}.unpacked"
        if not marker.exists():
            _run(["dpkg-deb", "-x", str(found[-1]), str(root)], cwd=debs, fix="is dpkg-deb installed?")
            marker.write_text(found[-1].name)
    return root / "usr" / "share" / "doc"


def _run(command: list[str], *, cwd: Path, fix: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-400:]}; {fix}")
