"""deploy/kubernetes/ is a consistent minimal manifest set (no cluster runs here, so the files are
parsed and checked): the app Deployment with /readyz and /healthz probes on its container port, a
Service that selects it, the migrate Job, the periodic health CronJob, settings from a ConfigMap
and secrets from a Secret, every name a documented setting, and only pinned images."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO
from .container_files import SECRET_NAME, image_tag, load_compose

MANIFESTS = REPO / "deploy" / "kubernetes"
DOCS = REPO / "docs" / "operations.md"
SECRET = "memconsole"


def _load(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    """Every manifest object by kind (each kind appears once in this set; the job worker's
    Deployment is `Deployment/worker`, checked in test_worker_manifests.py)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in _load(path):
            kind = document["kind"]
            if kind == "Deployment" and document["metadata"]["labels"].get("app.kubernetes.io/component") == "worker":
                kind = "Deployment/worker"
            assert kind not in found, f"{path.name}: a second {kind}"
            found[kind] = document
    return found


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def _containers(objects: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (kind, container)
        for kind, obj in objects.items()
        if kind in {"Deployment", "Job", "CronJob"}
        for container in _pod_spec(obj)["containers"]
    ]


def _documented_settings() -> set[str]:
    return set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|", DOCS.read_text(), re.MULTILINE))


def test_it_has_the_minimal_set(objects):
    assert {"Kustomization", "ConfigMap", "Deployment", "Service", "Job", "CronJob"} <= set(objects)
    assert objects["Deployment"]["apiVersion"] == "apps/v1"
    assert objects["Job"]["apiVersion"] == objects["CronJob"]["apiVersion"] == "batch/v1"
    listed = set(objects["Kustomization"]["resources"])
    on_disk = {path.name for path in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed <= on_disk
    assert on_disk - listed == {"migrate-job.yaml"}, "only the migrate Job is applied on its own, before a rollout"


def test_the_selectors_match_the_pod_labels(objects):
    deployment = objects["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    service_selector = objects["Service"]["spec"]["selector"]
    assert service_selector.items() <= labels.items()
    for kind in ("Job", "CronJob"):
        pod_template = objects[kind]["spec"]
        pod_template = pod_template["jobTemplate"]["spec"] if kind == "CronJob" else pod_template
        pod_labels = pod_template["template"]["metadata"]["labels"]
        assert not service_selector.items() <= pod_labels.items(), f"the Service must not send traffic to the {kind}"


def _port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container["ports"] if "name" in p}
    assert port in named, f"no container port named {port}"
    return named[port]


def test_the_probes_ask_readyz_and_healthz_on_the_container_port(objects, dockerfile):
    (container,) = _pod_spec(objects["Deployment"])["containers"]
    container_port = _port_number(container, container["ports"][0]["containerPort"])
    assert str(container_port) == dockerfile.final.last("EXPOSE").args.split("/")[0].strip()
    first_host = objects["ConfigMap"]["data"]["ALLOWED_HOSTS"].split(",")[0].strip()
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert _port_number(container, get["port"]) == container_port
        headers = {header["name"]: header["value"] for header in get.get("httpHeaders", [])}
        assert headers.get("Host") == first_host, f"{probe}: Django refuses a Host not in ALLOWED_HOSTS"
    (service_port,) = objects["Service"]["spec"]["ports"]
    assert _port_number(container, service_port["targetPort"]) == container_port
    assert objects["Service"]["spec"].get("type", "ClusterIP") == "ClusterIP", "gunicorn never faces clients"


def test_the_jobs_migrate_once_and_check_health_periodically(objects):
    job = objects["Job"]
    (migrate,) = _pod_spec(job)["containers"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert _pod_spec(job)["restartPolicy"] == "Never"
    cronjob = objects["CronJob"]
    assert len(cronjob["spec"]["schedule"].split()) == 5
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    (health,) = _pod_spec(cronjob)["containers"]
    assert health["command"][:3] == ["python", "manage.py", "memory_health"]
    assert _pod_spec(cronjob)["restartPolicy"] == "Never"


def test_every_variable_is_a_documented_setting_and_secrets_come_from_the_secret(objects):
    documented = _documented_settings()
    config = objects["ConfigMap"]["data"]
    assert not set(config) - documented, f"the ConfigMap sets undocumented names: {set(config) - documented}"
    assert not [name for name in config if SECRET_NAME.search(name)], "a secret in the ConfigMap"
    for kind, container in _containers(objects):
        assert {"configMapRef": {"name": objects["ConfigMap"]["metadata"]["name"]}} in container["envFrom"]
        for variable in container.get("env", []):
            name = variable["name"]
            assert name in documented, f"{kind}: {name} is not documented in docs/operations.md"
            assert "value" not in variable or not SECRET_NAME.search(name), f"{kind}: {name} has a literal value"
            if SECRET_NAME.search(name):
                ref = variable["valueFrom"]["secretKeyRef"]
                assert ref == {"name": SECRET, "key": name}
        names = {variable["name"] for variable in container.get("env", [])}
        assert {"SECRET_KEY", "DATABASE_URL"} <= names, f"{kind} needs the key and the database"


def test_it_runs_pinned_images_as_the_image_user(objects, dockerfile):
    compose_image = load_compose(REPO / "docker-compose.yml")["services"]["memconsole"]["image"]
    user = dockerfile.final.last("USER").args.split(":", 1)[0].strip()
    runs = " ".join(run.args for run in dockerfile.final.all("RUN"))
    uid = re.search(rf"useradd[^&;]*--uid\s+(\d+)[^&;]*\b{user}\b", runs)
    assert uid, "the Dockerfile creates its user with a fixed --uid"
    for kind, container in _containers(objects):
        tag = image_tag(container["image"])
        assert tag and tag != "latest", f"{kind}: {container['image']} is not pinned"
        assert container["image"] == compose_image
    for kind in ("Deployment", "Job", "CronJob"):
        security = _pod_spec(objects[kind])["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] == int(uid[1]), f"{kind}: runAsUser is not the image's user"
    for path in MANIFESTS.glob("*.yaml"):
        assert not re.search(r"image:\s*\S+:latest\b", path.read_text()), f"{path.name} uses a latest tag"
