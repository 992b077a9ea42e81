"""The Dockerfile and docker-compose.yml follow the production rules (no Docker engine runs here, so
the files are parsed and checked): multi-stage build on a slim pinned base, non-root user,
/readyz healthcheck, gunicorn with memconsole's config, static files and the model at build time,
and no secret baked into the image or written into the compose file."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

from memconsole.memory.management.commands import fetch_model

from .conftest import REPO
from .container_files import (
    ENV_REFERENCE,
    SECRET_NAME,
    bash_tcp_probe,
    compose_environment,
    declared_args,
    env_references,
    image_tag,
    parse_env_file,
)
from .test_operations_docs import configuration_names

BUILD_ONLY_MARKER = "build-only"
PINNED_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _requirement(name: str) -> str:
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.lower().startswith(f"{name.lower()}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in requirements.txt")


# --- Dockerfile ---------------------------------------------------------------------------------


def test_it_builds_in_stages_and_runs_on_a_slim_python(dockerfile):
    assert len(dockerfile.stages) >= 2
    builder = dockerfile.stages[0]
    assert builder.name, "the build stage needs a name to copy from"
    assert dockerfile.final.base.startswith("python:3.11-slim")
    copied_from = {
        word.split("=", 1)[1]
        for instruction in dockerfile.final.all("COPY")
        for word in instruction.args.split()
        if word.startswith("--from=")
    }
    assert builder.name in copied_from
    assert not dockerfile.final.all("RUN") or all(
        "pip install" not in run.args for run in dockerfile.final.all("RUN")
    ), "dependencies are installed in the builder, not in the runtime image"


def test_it_pins_every_base_image(dockerfile):
    stage_names = dockerfile.stage_names()
    for stage in dockerfile.stages:
        if stage.base in stage_names:
            continue
        tag = image_tag(stage.base)
        assert tag and tag != "latest", f"FROM {stage.base} is not pinned to a version"
        assert PINNED_DIGEST.search(stage.base), f"FROM {stage.base} is not pinned by digest (a tag can move)"


def test_it_runs_as_a_non_root_user(dockerfile):
    final = dockerfile.final
    user = final.last("USER")
    assert user is not None, "the runtime stage sets no USER"
    name = user.args.split(":", 1)[0].strip()
    assert name not in {"root", "0", ""}
    assert user.line < final.last("CMD").line
    assert any("useradd" in run.args and name in run.args for run in final.all("RUN")), "the user is created"


def test_it_checks_readiness_on_readyz_with_python(dockerfile):
    healthcheck = dockerfile.final.last("HEALTHCHECK")
    assert healthcheck is not None
    source = dockerfile.healthcheck_python()
    compile(source, "HEALTHCHECK", "exec")
    assert "/readyz" in source
    assert "urllib" in source
    assert not re.search(r"\b(curl|wget)\b", healthcheck.args)
    port = dockerfile.final.last("EXPOSE").args.split("/")[0].strip()
    assert f"127.0.0.1:{port}/readyz" in source


def test_it_serves_with_gunicorn_and_takes_workers_from_the_environment(dockerfile):
    command = dockerfile.final.last("CMD").json_args()
    assert command, "CMD is in exec (JSON) form, so gunicorn is PID 1 and gets the signals"
    assert command[:2] == ["gunicorn", "memconsole.wsgi"]
    assert command[command.index("--config") + 1] == "python:memconsole.gunicorn_config"
    port = dockerfile.final.last("EXPOSE").args.split("/")[0].strip()
    assert command[command.index("--bind") + 1] == f"0.0.0.0:{port}"
    assert not {"--workers", "-w"} & set(command), "workers come from WEB_CONCURRENCY, not a fixed flag"
    assert dockerfile.final.env().get("WEB_CONCURRENCY") == "1"  # the safe default with embedded Chroma


def test_it_runs_production_settings_with_state_in_a_volume(dockerfile):
    env = dockerfile.final.env()
    assert env["MEMCONSOLE_ENV"] == "production"
    volumes = " ".join(v.args for v in dockerfile.final.all("VOLUME"))
    assert env["MEMCONSOLE_VAR_DIR"] in volumes


def test_it_collects_static_files_at_build_time_with_a_throwaway_key(dockerfile):
    runs = [run for run in dockerfile.stages[0].all("RUN") if "collectstatic" in run.args]
    assert len(runs) == 1
    words = shlex.split(runs[0].args)
    assert "MEMCONSOLE_ENV=production" in words
    static_root = next(w.split("=", 1)[1] for w in words if w.startswith("MEMCONSOLE_STATIC_ROOT="))
    assert dockerfile.final.env()["MEMCONSOLE_STATIC_ROOT"] == static_root
    assert any(w.startswith("SECRET_KEY=") for w in words)


def test_it_fetches_and_verifies_the_model_at_build_time_unless_skipped(dockerfile):
    assert "MEMCONSOLE_SKIP_MODEL" in dockerfile.stages[0].args()
    runs = [run for run in dockerfile.stages[0].all("RUN") if "fetch_model" in run.args]
    assert len(runs) == 1
    assert "$MEMCONSOLE_SKIP_MODEL" in runs[0].args
    model_dir = re.search(r"MEMCONSOLE_MODEL_DIR=(\S+)", runs[0].args)[1]
    assert dockerfile.final.env()["MEMCONSOLE_MODEL_DIR"] == model_dir
    assert re.fullmatch(r"[0-9a-f]{64}", fetch_model.MODEL_SHA256)  # what fetch_model checks the archive against


def test_it_bakes_no_secret_into_the_image(dockerfile):
    for stage in dockerfile.stages:
        leaked = [name for name in stage.env() if SECRET_NAME.search(name)]
        assert not leaked, (
            f"ENV {leaked} in stage {stage.name or stage.base}: secrets come from the runtime environment"
        )
    arg_names = list({**_preamble_args(dockerfile), **_all_stage_args(dockerfile)})
    assert not [name for name in arg_names if SECRET_NAME.search(name)], (
        "build arguments are visible in the image history"
    )
    for run in dockerfile.instructions("RUN"):
        for name, value in re.findall(r"\b([A-Z][A-Z0-9_]*)=(\S+)", run.args):
            if SECRET_NAME.search(name):
                assert value.startswith(BUILD_ONLY_MARKER), f"line {run.line}: {name} has a real-looking value"
    for copy in dockerfile.instructions("COPY") + dockerfile.instructions("ADD"):
        assert ".env" not in copy.args.split() and "var" not in copy.args.split()


def test_it_keeps_local_state_and_secrets_out_of_the_build_context():
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".env", ".env.*", "var", ".venv", ".git"} <= ignored


def _preamble_args(dockerfile) -> dict:
    return declared_args([i for i in dockerfile.preamble if i.keyword == "ARG"])


def _all_stage_args(dockerfile) -> dict:
    out: dict = {}
    for stage in dockerfile.stages:
        out.update(stage.args())
    return out


# --- docker-compose.yml -------------------------------------------------------------------------


def test_it_composes_memconsole_postgres_and_a_chroma_server_from_pinned_images(compose):
    services = compose["services"]
    assert {"memconsole", "postgres", "chroma"} <= set(services)
    for name, service in services.items():
        tag = image_tag(service.get("image", ""))
        assert tag and tag != "latest", f"service {name} has no pinned image"
        if not service["image"].startswith("memconsole:"):  # pulled, not built here: a digest cannot move like a tag
            assert PINNED_DIGEST.search(service["image"]), f"service {name}'s image is not pinned by digest"
    assert services["memconsole"].get("build") in (".", {"context": "."})
    # Chroma's server and client speak one API version: the server image follows requirements.txt.
    assert image_tag(services["chroma"]["image"]) == _requirement("chromadb")


def test_it_reads_every_secret_from_the_env_file(compose):
    services = compose["services"]
    for name in ("memconsole", "migrate"):
        assert ".env" in services[name]["env_file"], f"{name} must take its settings from .env"
    for name, service in services.items():
        for key, value in compose_environment(service).items():
            if key == "DATABASE_URL":
                password = re.match(r"^[a-z]+://[^:/@]+:(.*)@[^@]+$", value)
                assert password and ENV_REFERENCE.match(password[1]), f"{name}: DATABASE_URL holds a literal password"
            elif SECRET_NAME.search(key):
                assert ENV_REFERENCE.match(value), f"{name}: {key} must come from .env without a default"
    text = (REPO / "docker-compose.yml").read_text()
    assert not re.search(r"\$\{[A-Z_0-9]+:?-", text), "no ${NAME:-default}: a missing secret must stop compose"


def test_it_starts_services_in_order_once_they_are_healthy(compose):
    services = compose["services"]
    for name in ("postgres", "chroma"):
        assert services[name]["healthcheck"]["test"], f"{name} has no healthcheck"
    assert "healthcheck" not in services["memconsole"], "memconsole uses the image's /readyz HEALTHCHECK"
    depends = services["memconsole"]["depends_on"]
    assert depends["postgres"]["condition"] == "service_healthy"
    assert depends["chroma"]["condition"] == "service_healthy"
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["command"][-3:] == ["manage.py", "migrate", "--noinput"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_it_migrates_once_with_the_app_image_and_settings(compose):
    services = compose["services"]
    migrate, app = services["migrate"], services["memconsole"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["restart"] == "no", "a one-shot service: compose must not restart it after it exits"
    assert migrate["image"] == app["image"] and migrate.get("build") == app.get("build")
    assert migrate["env_file"] == app["env_file"]
    assert compose_environment(migrate)["DATABASE_URL"] == compose_environment(app)["DATABASE_URL"]
    assert not migrate.get("ports")


def test_it_checks_chroma_with_bash_on_the_heartbeat_not_curl(compose):
    """chromadb/chroma (the Rust server on debian:stable-slim) ships bash but no curl, wget or python."""
    healthcheck = compose["services"]["chroma"]["healthcheck"]
    script, port, path = bash_tcp_probe(healthcheck)
    assert not re.search(r"\b(curl|wget|python3?)\b", script)
    assert str(port) == compose_environment(compose["services"]["memconsole"])["CHROMA_PORT"]
    assert path == "/api/v2/heartbeat"
    assert " 200 " in script, "only an HTTP 200 counts: an open port with an erroring server is not healthy"


class _Heartbeat(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        status = self.status if self.path == "/api/v2/heartbeat" else 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:  # quiet: no request lines in the test output
        pass


@contextmanager
def _heartbeat_server(status: int) -> Iterator[int]:
    handler = type("Heartbeat", (_Heartbeat,), {"status": status})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _run_probe(script: str, port: int, new_port: int) -> int:
    bash = shutil.which("bash")
    assert bash, "bash is needed to run the health check here"
    moved = script.replace(f"/dev/tcp/127.0.0.1/{port}", f"/dev/tcp/127.0.0.1/{new_port}")
    return subprocess.run([bash, "-c", moved], capture_output=True, timeout=10).returncode


def test_the_chroma_health_check_passes_only_on_a_200_heartbeat(compose):
    script, port, _path = bash_tcp_probe(compose["services"]["chroma"]["healthcheck"])
    with _heartbeat_server(200) as open_port:
        assert _run_probe(script, port, open_port) == 0
    with _heartbeat_server(500) as erroring_port:
        assert _run_probe(script, port, erroring_port) != 0
    assert _run_probe(script, port, open_port) != 0, "nothing listens there any more"


def test_it_runs_several_workers_only_with_the_chroma_server(compose):
    environment = compose_environment(compose["services"]["memconsole"])
    assert environment["CHROMA_HOST"] == "chroma"
    assert environment["CHROMA_PORT"] == "8000"
    assert environment["DATABASE_URL"].startswith("postgres://")


def test_it_keeps_data_in_named_volumes(compose, dockerfile):
    declared = set(compose["volumes"])
    mounts = {
        name: {volume.split(":", 1)[1] for volume in service.get("volumes", [])}
        for name, service in compose["services"].items()
    }
    assert "/var/lib/postgresql/data" in mounts["postgres"]
    assert "/data" in mounts["chroma"]
    assert dockerfile.final.env()["MEMCONSOLE_VAR_DIR"] in mounts["memconsole"]
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            assert volume.split(":", 1)[0] in declared, f"{volume} is not a declared named volume"


def test_it_publishes_only_the_console_and_only_on_loopback(compose):
    services = compose["services"]
    for name, service in services.items():
        if name != "memconsole":
            assert not service.get("ports"), f"{name} must stay on the internal network"
    for port in services["memconsole"]["ports"]:
        assert str(port).startswith("127.0.0.1:"), "the console is published for a local TLS proxy only"


# --- .env.example -------------------------------------------------------------------------------


def test_it_explains_every_variable_compose_needs_without_giving_secrets():
    values, _commented = parse_env_file(REPO / ".env.example")
    compose_text = (REPO / "docker-compose.yml").read_text()
    missing = env_references(compose_text) - set(values)
    assert not missing, f".env.example does not list {missing}"
    for name, value in values.items():
        if SECRET_NAME.search(name):
            assert value == "", f".env.example gives {name} a value; it must be generated by the operator"
    assert {"SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "MEMCONSOLE_AUDIT_KEY"} <= set(values)
    assert "WEB_CONCURRENCY" in values


def test_it_lists_only_real_settings_in_the_env_example():
    values, commented = parse_env_file(REPO / ".env.example")
    compose_only = {"POSTGRES_PASSWORD"}
    unknown = (set(values) | commented) - configuration_names() - compose_only
    assert not unknown, f".env.example names settings memconsole does not read: {unknown}"
