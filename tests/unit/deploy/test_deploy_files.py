"""The deployment files read as data: every ``VECTORSYNC_*`` variable is a real setting, the example settings
load, the Dockerfile's layers and its .dockerignore (the real tools: tests/integration/deploy/test_deploy_tools.py;
deploy/k8s/: test_k8s_manifests.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import get_args, get_origin

import pytest
from pydantic import BaseModel

from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
EXAMPLE_CONFIG = DEPLOY / "vectorsync.toml"
ENV_EXAMPLE = DEPLOY / ".env.example"
CONFIG_IN_CONTAINER = "/etc/vectorsync/vectorsync.toml"
QUEUES = f"{LIVE_QUEUE},{BULK_QUEUE}"
#: Kubernetes versions the manifests must be valid for: the oldest supported here, and the newest known.
K8S_VERSIONS = ("1.29.0", "latest")


def setting_problem(name: str) -> str | None:
    """Why ``name`` is not a settings variable (``VECTORSYNC_SECTION__KEY``), or None when it is one.

    ``models.NAME.*`` and ``collections.NAME.*`` take any NAME; a variable may also
    stop at a section or a nested model (its value is then JSON).
    """
    if name == "VECTORSYNC_CONFIG":
        return None
    if not name.startswith("VECTORSYNC_"):
        return f"{name} does not start with VECTORSYNC_"
    parts = name.removeprefix("VECTORSYNC_").lower().split("__")
    model: type[BaseModel] = Settings
    where = "the settings"
    index = 0
    while index < len(parts):
        part = parts[index]
        fields = model.model_fields
        if part not in fields:
            return (
                f"{name}: {part!r} is not a key of {where} (keys: {', '.join(sorted(fields))}); "
                f"variables are VECTORSYNC_<SECTION>__<KEY>, with two underscores between parts"
            )
        annotation = fields[part].annotation
        where = f"{where} > {part}" if where != "the settings" else part
        index += 1
        if get_origin(annotation) is dict:
            if index == len(parts):
                return None
            where = f"{where}.{parts[index]}"
            index += 1  # any NAME
            annotation = get_args(annotation)[1]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        if index < len(parts):
            return f"{name}: {where} is a value, it has no key {parts[index]!r}"
    return None


@pytest.mark.parametrize(
    "name",
    [
        "VECTORSYNC_CONFIG",
        "VECTORSYNC_BROKER__URL",
        "VECTORSYNC_VECTORS__KEY",
        "VECTORSYNC_VECTORS",
        "VECTORSYNC_MODELS__OPENAI_SMALL__DIMENSIONS",
        "VECTORSYNC_COLLECTIONS__NOTES__SOURCE__TABLE",
        "VECTORSYNC_COLLECTIONS__NOTES__CHUNKER__MAX_TOKENS",
    ],
)
def test_the_variable_check_accepts_real_settings(name: str) -> None:
    assert setting_problem(name) is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("VECTORSYNC_VECTORS__URLS", "'urls' is not a key of vectors"),
        ("VECTORSYNC_VECTORS_URL", "'vectors_url' is not a key of the settings"),
        ("VECTORSYNC_BROKER__URL__HOST", "broker > url is a value"),
        ("VECTORSYNC_MODELS__OPENAI__API_KEY", "'api_key' is not a key of models.openai"),
        ("VECTORSYNC_COLLECTIONS__NOTES__SOURCE__TABEL", "'tabel' is not a key of collections.notes > source"),
        ("VECTORSYNC_QUEUE__NAME", "'queue' is not a key of the settings"),
    ],
)
def test_the_variable_check_names_what_is_wrong(name: str, says: str) -> None:
    problem = setting_problem(name)
    assert problem is not None and says in problem, problem


def assert_real_settings(names: dict[str, str]) -> None:
    """``names``: variable -> where it is set. Fails naming every variable that is not a setting."""
    problems = [
        f"{problem} (set in {where})"
        for name, where in sorted(names.items())
        if name.startswith("VECTORSYNC_") and (problem := setting_problem(name))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.usefixtures("no_vectorsync_env")
def test_example_config_loads_and_covers_every_section(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(EXAMPLE_CONFIG)
    data = tomllib.loads(EXAMPLE_CONFIG.read_text())
    assert set(data) == set(Settings.model_fields), "deploy/vectorsync.toml should show every section"
    assert settings.embeddings.chain and all(model in settings.models for model in settings.embeddings.chain)
    assert settings.collections


def test_dockerfile_builds_a_small_non_root_image_with_cached_dependencies() -> None:
    lines = _instructions(DOCKERFILE.read_text())
    assert lines[0] == "FROM python:3.11-slim"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "the image must run as a non-root user"
    installs = [i for i, line in enumerate(lines) if "pip install" in line]
    deps = next(i for i in installs if '".[pgvector,qdrant,openai,flower]"' in lines[i])
    assert "--no-cache-dir" in lines[deps]
    code = min(i for i, line in enumerate(lines) if re.match(r"COPY (store|worker|producer)\b", line))
    assert deps < code, "dependencies must be installed before the code is copied, for the layer cache"
    early = [line for line in lines[:deps] if line.startswith(("COPY", "ADD"))]
    assert early == ["COPY pyproject.toml ./"], f"only pyproject.toml may come before the dependency layer: {early}"
    assert "torch" not in DOCKERFILE.read_text().lower().replace("no torch", "")
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"{line}: {source} does not exist"


def _instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def test_dockerignore_keeps_what_the_image_copies() -> None:
    text = (DEPLOY / "Dockerfile.dockerignore").read_text()
    ignore = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"
    for needed in ("pyproject.toml", "README.md", "store/", "worker/", "producer/", "deploy/vectorsync.toml"):
        assert f"!{needed}" in ignore, needed
