"""The background-job worker in docker-compose.yml and deploy/kubernetes/ (issue 21): it runs
`manage.py jobs_worker` from the app's image with the app's settings and secrets, after the
migration, and has the time to finish the job in hand when it is stopped."""

from __future__ import annotations

from typing import Any

import yaml

from .conftest import REPO
from .container_files import load_compose

MANIFESTS = REPO / "deploy" / "kubernetes"


def _documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found += [document for document in yaml.safe_load_all(path.read_text()) if document]
    return found


def test_compose_runs_a_worker_after_the_migration_with_the_app_image_and_settings():
    services = load_compose(REPO / "docker-compose.yml")["services"]
    worker, web = services["worker"], services["memconsole"]
    assert worker["command"] == ["python", "manage.py", "jobs_worker"]
    assert worker["image"] == web["image"] and worker["env_file"] == web["env_file"]
    assert worker["environment"]["CHROMA_HOST"] == "chroma"  # never an embedded index beside the web's
    assert worker["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert not worker.get("ports") and worker["restart"] == "unless-stopped"
    assert worker["stop_grace_period"] == "2m"


def test_kubernetes_has_a_worker_deployment_with_the_web_pods_settings():
    deployments = [d for d in _documents() if d["kind"] == "Deployment"]
    by_component = {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in deployments}
    assert set(by_component) == {"web", "worker"}
    worker, web = by_component["worker"], by_component["web"]
    assert worker["spec"]["selector"]["matchLabels"] == worker["spec"]["template"]["metadata"]["labels"]
    assert worker["spec"]["selector"]["matchLabels"] != web["spec"]["selector"]["matchLabels"]
    pod, web_pod = worker["spec"]["template"]["spec"], web["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (web_container,) = web_pod["containers"]
    assert container["command"] == ["python", "manage.py", "jobs_worker"]
    assert container["image"] == web_container["image"]
    assert container["envFrom"] == web_container["envFrom"] and container["env"] == web_container["env"]
    assert pod["securityContext"] == web_pod["securityContext"]
    assert pod["terminationGracePeriodSeconds"] >= 60
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert "worker-deployment.yaml" in kustomization["resources"]
