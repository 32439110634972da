"""``vectorsync dev`` and ``scripts/dev``: the first try, from a fresh clone, stopped with Ctrl-C.

The sample corpus and the settings the command writes are checked in
tests/unit/producer/cli/dev/. These slow tests run the real thing:
``vectorsync dev --no-serve`` from this checkout, and the README's main-job command ``scripts/dev`` in a fresh clone
with a temporary HOME, which bootstraps its own .venv, serves, and must stop
every process it started on SIGINT. While it serves, the psql ``UPDATE`` its
printout suggests must reach the search it suggests next within 2 s, with
nothing else run: change capture, on in the settings the dev system writes.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from producer.cli.dev.banner import SERVING, TRY_QUERY, TRY_UPDATE
from producer.cli.dev.corpus import CRM_NOTES
from producer.cli.dev.demo import SEARCHES
from store.settings import load_settings
from tests.workers import ROOT, child_env

#: A match line: indented score, then the chunk id ("try:0", "14:0").
MATCH = re.compile(r"^\s+-?\d+\.\d{3}\s+\S+:\d+\s")
HEADER = re.compile(r"^search (\d+)/(\d+) .*: (\d+) matches")
#: Seconds from a psql UPDATE to a search that finds its text: the relay polls the outbox every 0.5 s.
CAPTURE_SECONDS = 2.0
#: The word the printout's UPDATE brings into the sample notes.
NEW_WORD = "Zurich"


def _referring_to(folder: Path) -> list[str]:
    """Processes (other than this one) whose working directory, command line or VECTORSYNC_CONFIG is in ``folder``."""
    marker, found = str(folder), []
    for process in psutil.process_iter(["pid", "name", "cmdline", "cwd", "status", "environ"]):
        if process.info["pid"] == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(process.info["cmdline"] or [])
        cwd = process.info["cwd"] or ""
        config = (process.info["environ"] or {}).get("VECTORSYNC_CONFIG", "")
        if marker in cmdline or marker in config or cwd == marker or cwd.startswith(marker + os.sep):
            found.append(f"{process.info['pid']} {process.info['name']} (cwd {cwd}): {cmdline[:200]}")
    return found


def _kill_referring_to(folder: Path) -> None:
    for line in _referring_to(folder):
        with contextlib.suppress(psutil.Error):
            psutil.Process(int(line.split()[0])).kill()


class _Output:
    """Collects a process's output lines in a thread (and copies them to a log file)."""

    def __init__(self, process: subprocess.Popen[str], log: Path) -> None:
        self.lines: list[str] = []
        self._log = log
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with self._log.open("w") as log:
            for line in process.stdout:
                self.lines.append(line.rstrip("\n"))
                log.write(line)
                log.flush()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def tail(self, count: int = 60) -> str:
        return "\n".join(self.lines[-count:])

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _wait_for_line(process: subprocess.Popen[str], output: _Output, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(needle in line for line in output.lines):
        if process.poll() is not None:
            output.join(5)
            pytest.fail(f"exited with {process.returncode} before {needle!r}:\n{output.tail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {needle!r} after {timeout}s:\n{output.tail()}")
        time.sleep(0.5)


def _assert_searches(lines: list[str]) -> None:
    """Each of the searches printed a header with its match count, and that many lines with scores."""
    seen = 0
    for index, line in enumerate(lines):
        header = HEADER.match(line)
        if not header:
            continue
        seen += 1
        count = int(header.group(3))
        assert count >= 1, line
        block = lines[index + 1 : index + 1 + 2 * count]
        assert sum(bool(MATCH.match(entry)) for entry in block) == count, "\n".join([line, *block])
    assert seen == len(SEARCHES), "\n".join(lines[-80:])


def _clean_env(home: Path) -> dict[str, str]:
    """The machine's environment as a new user has it: a fresh HOME, no VECTORSYNC_*, no active venv.

    The real pip and uv caches stay (PIP_CACHE_DIR, UV_CACHE_DIR), so packages are not downloaded again.
    """
    caches = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    pip_cache = os.environ.get("PIP_CACHE_DIR") or str(caches / "pip")
    uv_cache = os.environ.get("UV_CACHE_DIR") or str(caches / "uv")
    env = {
        k: v
        for k, v in child_env().items()
        if k
        not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
    }
    path = [
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry and not (Path(entry).parent / "pyvenv.cfg").exists()
    ]
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join(path),
        PIP_CACHE_DIR=pip_cache,
        UV_CACHE_DIR=uv_cache,
        PYTHONUNBUFFERED="1",
    )
    return env


def _printed(lines: list[str], needle: str) -> str:
    """The one suggested command of the printout that holds ``needle``."""
    found = [line.strip() for line in lines if needle in line]
    assert len(found) == 1, f"{needle!r} in {len(found)} lines of the printout:\n" + "\n".join(lines[-30:])
    return found[0]


def _shell(line: str, clone: Path, env: dict[str, str]) -> str:
    """``line`` as a user types it in a terminal in ``clone``; its output."""
    result = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    return result.stdout


def _psql_update_reaches_search(clone: Path, lines: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The printout's psql UPDATE (a connection of its own, no vectorsync code), then its search until the new
    text shows, as a user would with nothing else run: seconds from the UPDATE to the start and to the end of
    the search that found it, which must start within CAPTURE_SECONDS."""
    update = _printed(lines, TRY_UPDATE)
    search = _printed(lines, f'search crm_notes "{TRY_QUERY}"')
    assert "vectorsync index" not in "\n".join(lines), "capture needs no `vectorsync index`"
    assert NEW_WORD in TRY_UPDATE and not any(NEW_WORD in note[4] for note in CRM_NOTES)
    assert NEW_WORD not in _shell(search, clone, env)
    start = time.monotonic()
    assert _shell(update, clone, env).strip() == "UPDATE 1"
    while True:
        began = time.monotonic() - start
        if began > CAPTURE_SECONDS:
            pytest.fail(f"{NEW_WORD!r} not found {began:.1f}s after {update}\nby {search}")
        if NEW_WORD in _shell(search, clone, env):
            return began, time.monotonic() - start


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Iterator[Path]:
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout to clone")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    try:
        yield clone
    finally:
        _kill_referring_to(clone)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_scripts_dev_in_a_fresh_clone_serves_and_stops_on_ctrl_c(fresh_clone: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(home)
    env["VECTORSYNC_SKIP_LOCAL"] = "1"  # no torch: minutes less; the dev system says it uses `fake`
    started = time.monotonic()
    process = subprocess.Popen(
        ["scripts/dev"],
        cwd=fresh_clone,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = _Output(process, tmp_path / "scripts-dev.log")
    try:
        _wait_for_line(process, output, SERVING, timeout=900)
        ready = time.monotonic() - started
        text = output.text
        assert "embedding model: fake" in text and "sentence-transformers does not import" in text
        assert (fresh_clone / ".venv" / "bin" / "vectorsync").exists()
        _assert_searches(output.lines)
        config = fresh_clone / ".vectorsync-dev" / "vectorsync.toml"
        assert f"VECTORSYNC_CONFIG={config}" in text
        assert re.search(r"Flower \(workers, tasks\):\s+http://127\.0\.0\.1:\d+", text)
        assert re.search(r"Redis \(broker, cache\):\s+redis://127\.0\.0\.1:\d+/0", text)
        assert "PostgreSQL (vectors, state):  postgresql://" in text
        assert _referring_to(fresh_clone), "nothing runs in the clone while it serves?"
        began, found = _psql_update_reaches_search(fresh_clone, output.lines, {**env, "VECTORSYNC_CONFIG": str(config)})
        demo = re.search(r"search crm_notes .* finds 2:0 (\d+\.\d+)s after the commit", text)
        assert demo and float(demo.group(1)) < CAPTURE_SECONDS, text[-3000:]

        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground process group
        stop = time.monotonic()
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 60s after Ctrl-C:\n{output.tail()}")
        stopped = time.monotonic() - stop
        output.join(10)
        assert code == 0, output.tail()
        assert "Ctrl-C: stopping everything" in output.text
        left: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = _referring_to(fresh_clone)
            if not left:
                break
            time.sleep(0.5)
        assert not left, "left behind:\n" + "\n".join(left)
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=fresh_clone, capture_output=True, text=True, check=True
        ).stdout
        assert status == "", f"the first try left the checkout dirty:\n{status}"
        print(
            f"scripts/dev: serving after {ready:.0f}s; a psql UPDATE found by the search started {began:.2f}s "
            f"after it (done {found:.2f}s after); stopped {stopped:.1f}s after Ctrl-C"
        )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_vectorsync_dev_no_serve_runs_searches_and_cleans_up(tmp_path: Path) -> None:
    """The dev command from this checkout, with the fake model: quick, and nothing left behind."""
    folder = tmp_path / "dev"
    env = child_env()
    result = subprocess.run(
        [sys.executable, "-m", "producer.cli", "dev", "--dir", str(folder), "--no-serve", "--model", "fake"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "embedding model: fake" in result.stdout
    _assert_searches(lines)
    assert "answered by the fake chat model" in result.stdout
    assert re.search(r"^  \[1\] \d+ \(\d\.\d\d\): ", result.stdout, re.M), result.stdout[-3000:]
    assert result.stdout.count(" 0 failed in ") == 2  # both reindex summaries
    assert load_settings(folder / "vectorsync.toml").collections.keys() == {"docs", "crm_notes"}
    time.sleep(0.5)
    assert not _referring_to(folder)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_vectorsync_dev_stops_everything_on_sigterm(tmp_path: Path) -> None:
    """SIGTERM (a service manager, `kill`) to the dev process alone: it stops what it started, then exits 0."""
    folder = tmp_path / "dev"
    env = child_env()
    process = subprocess.Popen(
        [sys.executable, "-m", "producer.cli", "dev", "--dir", str(folder), "--model", "fake"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = _Output(process, tmp_path / "dev.log")
    try:
        _wait_for_line(process, output, SERVING, timeout=300)
        _assert_searches(output.lines)
        assert _referring_to(folder)
        [dev1] = [p for p in psutil.Process(process.pid).children() if "dev1@%h" in " ".join(p.cmdline())]
        dev1.kill()  # a worker that dies on its own is started again, and the user is told
        _wait_for_line(process, output, "restarting dev1 (1 of 3)", timeout=30)
        assert f"dev1 (pid {dev1.pid}) exited with code -9" in output.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, output.tail()
        output.join(10)
        assert "SIGTERM: stopping everything" in output.text
        time.sleep(0.5)
        assert not _referring_to(folder), "\n".join(_referring_to(folder))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        _kill_referring_to(folder)
