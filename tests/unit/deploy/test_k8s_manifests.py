"""The Kubernetes manifests in deploy/k8s/, checked against the Kubernetes schemas and KEDA's CRD models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from store.contract import BULK_QUEUE, LIVE_QUEUE
from store.settings import load_settings
from tests.unit.deploy.test_deploy_files import (
    CONFIG_IN_CONTAINER,
    K8S,
    K8S_VERSIONS,
    QUEUES,
    assert_real_settings,
)

# --- deploy/k8s --------------------------------------------------------------------------------------------------


def _documents() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object in deploy/k8s (kustomization.yaml is kustomize's, not the cluster's)."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path, doc))
    return docs


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path, doc in _documents():
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in found, f"{path}: {key} is defined twice"
        found[key] = doc
    return found


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_match_the_kubernetes_schemas(version: str) -> None:
    import kubernetes_validate

    target = kubernetes_validate.latest_version() if version == "latest" else version
    checked, problems = [], []
    for path, doc in _documents():
        if doc["apiVersion"].startswith("keda.sh/"):
            continue  # a custom resource: checked against KEDA's CRD below
        try:
            kubernetes_validate.validate(doc, target, strict=True)
        except kubernetes_validate.ValidationError as exc:
            at = ".".join(str(part) for part in exc.absolute_path) or "(top)"
            problems.append(
                f"{path.name}: {doc['kind']} {doc['metadata']['name']} is not valid for Kubernetes "
                f"{target} at {at}: {exc.message}"
            )
        checked.append(doc["kind"])
    assert not problems, "\n".join(problems)
    assert {"Deployment", "Service", "ConfigMap", "Secret", "Namespace"} <= set(checked)


def test_keda_scaled_object_matches_the_crd_and_scales_the_workers_on_both_queues(
    manifests: dict[tuple[str, str], dict[str, Any]],
) -> None:
    from cloudcoil.models.keda.v1alpha1 import ScaledObject

    scaled = [doc for (kind, _), doc in manifests.items() if kind == "ScaledObject"]
    assert len(scaled) == 1
    doc = scaled[0]
    parsed = ScaledObject.model_validate(doc)
    # The models ignore unknown fields: a round trip that loses one shows a misspelt field.
    dumped = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert not (lost := _lost(doc, dumped)), f"not fields of KEDA's ScaledObject: {lost}"
    assert dumped == doc
    target = doc["spec"]["scaleTargetRef"]
    assert ("Deployment", target["name"]) in manifests
    assert manifests[("Deployment", target["name"])]["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    assert "replicas" not in manifests[("Deployment", target["name"])]["spec"], "KEDA owns the replica count"
    triggers = doc["spec"]["triggers"]
    assert all(t["type"] == "redis" for t in triggers)
    assert {t["metadata"]["listName"] for t in triggers} == {LIVE_QUEUE, BULK_QUEUE}
    for trigger in triggers:
        meta = trigger["metadata"]
        assert int(meta["listLength"]) > 0
        assert meta.get("address") or meta.get("addressFromEnv") or meta.get("host")
    assert 1 <= doc["spec"]["minReplicaCount"] <= doc["spec"]["maxReplicaCount"]


def _lost(original: Any, dumped: Any, path: str = "") -> list[str]:
    """Paths of keys in ``original`` that ``dumped`` lacks."""
    if isinstance(original, dict) and isinstance(dumped, dict):
        return [
            lost
            for key, value in original.items()
            for lost in ([f"{path}{key}"] if key not in dumped else _lost(value, dumped[key], f"{path}{key}."))
        ]
    if isinstance(original, list) and isinstance(dumped, list):
        return [
            lost for i, (a, b) in enumerate(zip(original, dumped, strict=False)) for lost in _lost(a, b, f"{path}{i}.")
        ]
    return []


def test_kustomization_lists_every_manifest_but_the_secret_example() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    listed = set(kustomization["resources"])
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert listed == present


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def _deployment(manifests: dict[tuple[str, str], dict[str, Any]], component: str) -> dict[str, Any]:
    found = [
        doc
        for (kind, _), doc in manifests.items()
        if kind == "Deployment" and doc["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, f"one {component} Deployment expected, found {len(found)}"
    return found[0]


def test_k8s_workloads_run_celery_with_the_config_map_and_the_secret(
    manifests: dict[tuple[str, str], dict[str, Any]],
) -> None:
    worker = _deployment(manifests, "worker")
    beat = _deployment(manifests, "beat")
    flower = _deployment(manifests, "flower")
    (container,) = _pod(worker)["containers"]
    assert container["command"] == ["celery", "-A", "worker", "worker", "-Q", QUEUES, "--loglevel", "INFO", "-E"]
    probe = " ".join(container["livenessProbe"]["exec"]["command"])
    assert "inspect ping" in probe and "celery@$HOSTNAME" in probe
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    assert _pod(beat)["containers"][0]["command"][:4] == ["celery", "-A", "worker", "beat"]
    assert _pod(flower)["containers"][0]["command"][:3] == ["python", "-m", "worker.runtime.flower"]
    for doc in (worker, beat, flower):
        pod = _pod(doc)
        assert doc["spec"]["selector"]["matchLabels"].items() <= doc["spec"]["template"]["metadata"]["labels"].items()
        assert pod["securityContext"]["runAsNonRoot"] is True
        (main,) = pod["containers"]
        env = {item["name"]: item.get("value") for item in main.get("env", [])}
        assert env["VECTORSYNC_CONFIG"] == CONFIG_IN_CONTAINER
        mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        config_volume = next(n for n, v in volumes.items() if "configMap" in v)
        assert mounts[config_volume] + "/vectorsync.toml" == CONFIG_IN_CONTAINER
        assert ("ConfigMap", volumes[config_volume]["configMap"]["name"]) in manifests
        for source in main.get("envFrom", []):
            assert ("Secret", source["secretRef"]["name"]) in manifests, "the Secret example must match the name"


def test_k8s_flower_service_reaches_the_flower_pods(manifests: dict[tuple[str, str], dict[str, Any]]) -> None:
    flower = _deployment(manifests, "flower")
    services = [doc for (kind, _), doc in manifests.items() if kind == "Service"]
    (service,) = services
    assert service["spec"]["selector"].items() <= flower["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in _pod(flower)["containers"][0]["ports"]}
    (port,) = service["spec"]["ports"]
    assert ports[port["targetPort"]] == port["port"] == 5555


def test_k8s_sets_only_real_settings(manifests: dict[tuple[str, str], dict[str, Any]]) -> None:
    names: dict[str, str] = {}
    for (kind, name), doc in manifests.items():
        if kind == "Secret":
            names.update({key: f"Secret {name}" for key in {**doc.get("data", {}), **doc.get("stringData", {})}})
        if kind == "Deployment":
            for container in _pod(doc)["containers"]:
                names.update({item["name"]: f"Deployment {name}" for item in container.get("env", [])})
    assert any(name.startswith("VECTORSYNC_") for name in names)
    assert_real_settings(names)


@pytest.mark.usefixtures("no_vectorsync_env")
def test_k8s_config_map_loads_with_the_pods_environment(
    manifests: dict[tuple[str, str], dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (config_map,) = [doc for (kind, _), doc in manifests.items() if kind == "ConfigMap"]
    config = tmp_path / "vectorsync.toml"
    config.write_text(config_map["data"]["vectorsync.toml"])
    (secret,) = [doc for (kind, _), doc in manifests.items() if kind == "Secret"]
    for key, value in secret["stringData"].items():
        if key.startswith("VECTORSYNC_") and value:
            monkeypatch.setenv(key, value)
    settings = load_settings(config)
    assert settings.worker.metrics_port == 9100  # the port the worker pods expose and annotate
    for model in settings.embeddings.chain:
        key_env = settings.models[model].api_key_env
        assert key_env is None or key_env in secret["stringData"], f"the Secret lacks {key_env}"
