"""vectorsync as a user installs it: the wheel built from this checkout, installed alone into a fresh virtual
environment outside the checkout, indexes a SQL table through a real worker and finds a record by searching.

What it proves, which no other test does (they all import the checkout):

- the sdist builds from the checkout, and the wheel builds from that sdist: every file the code needs at run
  time is in both (package data, modules outside the three packages would be missing here);
- ``pip install 'vectorsync-….whl[pgvector]'``, the install a pgvector user makes, brings every module a
  worker, ``init``, ``reindex`` and ``search`` import: a dependency that only the dev tools brought into
  ``.venv`` (kombu's ``packaging`` and ``redis`` once were) fails here with ModuleNotFoundError;
- the ``vectorsync`` and ``celery`` console scripts of that environment work from a folder that holds no
  vectorsync code (``store.__file__`` is asserted to be in the new environment's site-packages), with nothing
  of the checkout on sys.path: ``vectorsync init``, ``celery -A worker worker``, ``vectorsync reindex --wait``
  over a five-row SQL table, then ``vectorsync search`` ranks the expected record first. The collection
  searches in ``hybrid`` mode, so the worker also analyzes each chunk for the keyword index (the stop word
  lists, package data of ``store.vectors.keyword``, and snowballstemmer) and the search reads both indexes.

The model is the ``fake`` provider (hashed words, no extra, no server): the lightest setting a worker really
embeds with. The services are the suite's: the session's PostgreSQL with pgvector (``postgres_url``) and a
redis-server of this test's own as broker and cache, so its worker cannot take another test's tasks, nor
another test's worker its tasks; those servers and the test's own harness (the worker's ping, the table) run
from the checkout's .venv, every vectorsync process from the new environment.

Packages are installed offline first, from uv's cache, as scripts/bootstrap does, then online for whatever the
cache lacks. Under pytest-xdist it needs no xdist_group: its broker is its own server, its table and
collection have names of their own, and its files are under its own tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.backends import unique_name
from tests.crm import CrmTable
from tests.services import redis_server
from tests.settings_files import sql_collection, worker_sections
from tests.workers import ROOT, celery_worker, child_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: uv, installed in the checkout's .venv by scripts/bootstrap (PyPI's uv wheel).
UV = Path(sys.executable).with_name("uv")
#: The extras a pgvector user names; the ``fake`` model needs none of its own.
EXTRAS = "pgvector"
DIMENSIONS = 256
#: The source table's rows: (title, body, kind). The third is the one the search must find.
NOTES = [
    ("Renewal", "The renewal quote went out with the standard discount", "email"),
    ("Pricing", "Pricing review postponed until the budget approval", "meeting"),
    ("Onboarding", "Dana asked to move the onboarding workshop to Thursday afternoon", "call"),
    ("Security", "Security questionnaire returned with two open items", "email"),
    ("Migration", "Data migration pilot finished without incidents", "meeting"),
]
QUERY = "move the onboarding workshop"
EXPECTED = "3"  # the record id of NOTES[2]


def uv(*args: str, cwd: Path, timeout: float = 300) -> None:
    """``uv ARGS`` offline first (uv's cache only: no index round trips), then online for what the cache lacks."""
    env = {k: v for k, v in child_env().items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    offline = subprocess.run(
        [str(UV), *args, "--offline"], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if offline.returncode == 0:
        return
    online = subprocess.run([str(UV), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert online.returncode == 0, (
        f"uv {' '.join(args)} failed offline:\n{offline.stderr[-3000:]}\nand online:\n{online.stderr[-3000:]}"
    )


def source_tree(folder: Path) -> Path:
    """The checkout as a fresh clone with its uncommitted changes has it: a copy of the files git tracks or
    would add (not ignored), in ``folder``; the checkout itself where git cannot list them.

    Copied so that no leftover of an earlier build is built from: setuptools adds every file of a stale
    vectorsync.egg-info/SOURCES.txt to the sdist, so package data dropped from pyproject.toml still shipped
    from a checkout that once had it (and the build writes nothing into the checkout).
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    if listed.returncode != 0:
        return ROOT
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is left out, as a commit would
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


def build_and_install(folder: Path) -> Path:
    """Build the sdist from the checkout and the wheel from that sdist, then a fresh virtual environment with
    the checkout's Python and only that wheel (``[pgvector]``) in it; its ``bin`` folder."""
    folder.mkdir()
    source = source_tree(folder / "source")
    dist = folder / "dist"
    # No --sdist/--wheel: the wheel is built from the sdist, so a file the sdist leaves out is missing from the
    # wheel too.
    uv("build", "--quiet", "--python", sys.executable, "--out-dir", str(dist), str(source), cwd=folder)
    wheels = list(dist.glob("vectorsync-*.whl"))
    assert len(wheels) == 1 and len(list(dist.glob("vectorsync-*.tar.gz"))) == 1, sorted(dist.iterdir())
    venv = folder / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv), cwd=folder)
    python = venv / "bin" / "python"
    uv("pip", "install", "--quiet", "--python", str(python), f"{wheels[0]}[{EXTRAS}]", cwd=folder)
    return venv / "bin"


def user_env(bin: Path, config: Path) -> dict[str, str]:
    """The environment of a user of that virtual environment: its bin first on PATH, no other venv, nothing of
    the checkout on sys.path, no VECTORSYNC_* but the settings file, wide output for the tables."""
    env = {
        k: v
        for k, v in child_env().items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p).parent / "pyvenv.cfg").exists()]
    env.update(
        PATH=os.pathsep.join([str(bin), *path]),
        VIRTUAL_ENV=str(bin.parent),
        VECTORSYNC_CONFIG=str(config),
        PYTHONNOUSERSITE="1",
        COLUMNS="200",
    )
    # .pyc files are written as modules are first imported (a pip install compiles them all; uv's only with
    # --compile-bytecode, which costs more here than the few processes below save).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(bin: Path, *args: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    """A command of the new environment's bin; its output, which must end with exit code 0."""
    result = subprocess.run(
        [str(bin / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def search_rows(output: str) -> list[list[str]]:
    """The rows of ``vectorsync search``'s table: [score, id, text, metadata], best first (a row on one line: the
    table is printed at the pipe's width, wide enough for these short notes)."""
    rows = []
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line.strip())  # plain columns, two spaces apart at the least
        if len(cells) == 4:
            try:
                float(cells[0])
            except ValueError:
                continue
            rows.append(cells)
    return rows


def test_the_installed_wheel_indexes_and_searches(tmp_path: Path, postgres_url: str) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT), f"{tmp_path} must be outside the checkout {ROOT}"
    started = time.monotonic()
    bin = build_and_install(tmp_path / "build")
    built = time.monotonic() - started

    home = tmp_path / "user"  # the user's working directory: the settings file, nothing importable
    home.mkdir()
    config = home / "vectorsync.toml"
    env = user_env(bin, config)

    # Nothing of the checkout is imported: each package comes from the new environment's site-packages.
    where = json.loads(
        run(
            bin,
            "python",
            "-c",
            "import json, sysconfig, store, worker, producer\n"
            "print(json.dumps({'site': sysconfig.get_paths()['purelib'],"
            " 'files': [m.__file__ for m in (store, worker, producer)]}))",
            cwd=home,
            env=env,
        )
    )
    site = Path(where["site"]).resolve()
    assert site.is_relative_to(bin.parent.resolve()), where
    for file in where["files"]:
        assert Path(file).resolve().is_relative_to(site), f"{file} is not in {site}"

    collection = unique_name("wheel")
    crm = CrmTable(postgres_url, f"crm_{collection}")
    try:
        crm.insert([{"id": i, "title": t, "body": b, "kind": k} for i, (t, b, k) in enumerate(NOTES, start=1)])
        with redis_server() as (broker, _redis):
            head = worker_sections(broker=broker, database=postgres_url, dimensions=DIMENSIONS, batch_size=2)
            model = f'[models.hashed]\nprovider = "fake"\nmodel = "fake"\ndimensions = {DIMENSIONS}\n'
            chain = '[embeddings]\nchain = ["hashed"]\n'
            source = sql_collection(database=postgres_url, table=crm.name, collection=collection)
            # Hybrid: the worker also keeps the keyword index, whose analyzer reads the stop words (package data)
            # and stems with snowballstemmer; the search ranks by both legs.
            search = f'[collections.{collection}.search]\nmode = "hybrid"\n'
            config.write_text(f"{head}\n{model}\n{chain}\n{source}\n{search}")

            run(bin, "vectorsync", "init", cwd=home, env=env)
            # The worker of the new environment's ``celery`` script, from the user's folder; its log is in home.
            with celery_worker(config, concurrency=1, name=unique_name("wheel"), celery=[str(bin / "celery")],
                               cwd=home, env=env):  # fmt: skip
                reindexed = run(
                    bin, "vectorsync", "reindex", collection, "--wait", "--timeout", "120", cwd=home, env=env
                )
                assert f"{len(NOTES)} indexed" in reindexed, reindexed
                found = run(bin, "vectorsync", "search", collection, QUERY, "--limit", "3", cwd=home, env=env)
    finally:
        crm.close()

    rows = search_rows(found)
    assert rows, found
    _score, chunk, text, metadata = rows[0]
    assert chunk == f"{EXPECTED}:0" and "onboarding workshop" in text, found
    assert json.loads(metadata)["record_id"] == EXPECTED, found
    print(f"wheel built and installed in {built:.1f}s; indexed and searched in {time.monotonic() - started:.1f}s")
