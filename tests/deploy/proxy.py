"""The shipped nginx config (deploy/nginx.conf), rendered and run for real, and clients that are slow on purpose.

nginx comes from Debian's package (`apt-get install nginx`, done by .ci/run). Without it the tests
that run it skip, except in CI (CI set), where a missing nginx is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import LOOPBACK, REPO, in_ci

TEMPLATE = REPO / "deploy" / "nginx.conf"
PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")
TEMPLATE_NAMES = {"MEMCONSOLE_LISTEN", "MEMCONSOLE_UPSTREAM"}


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return next((str(path) for path in (Path("/usr/sbin/nginx"), Path("/sbin/nginx")) if path.exists()), None)


def require_nginx() -> str:
    """The nginx binary; skips without one, or fails when CI is set (CI installs Debian's package)."""
    binary = nginx_binary()
    if binary:
        return binary
    reason = "nginx is not installed (apt-get install nginx)"
    if in_ci():
        pytest.fail(f"{reason}; CI is set, so the reverse-proxy tests must run", pytrace=False)
    pytest.skip(f"{reason}; set CI=1 to make this a failure")


def render(template: str, **values: str) -> str:
    """The template with its ${NAME} placeholders filled in, as envsubst does in the nginx image."""
    names = set(PLACEHOLDER.findall(template))
    assert names == set(values), f"the template's placeholders are {sorted(names)}"
    return PLACEHOLDER.sub(lambda match: values[match[1]], template)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def main_config(directory: Path, server_config: Path) -> str:
    """A whole nginx.conf around the shipped server block, everything kept under `directory`."""
    temp = {name: directory / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir(exist_ok=True)
    # As root, nginx would run its workers as `nobody`, who cannot enter pytest's private tmp dirs.
    user = "user root;" if os.geteuid() == 0 else ""
    return f"""
daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    access_log {directory}/access.log;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {server_config};
}}
"""


@dataclass
class Nginx:
    """nginx running the shipped config in front of `upstream_port`, listening on loopback."""

    process: subprocess.Popen
    port: int
    directory: Path

    @classmethod
    def start(cls, binary: str, directory: Path, upstream_port: int) -> Nginx:
        port = free_port()
        server_config = directory / "memconsole.conf"
        server_config.write_text(
            render(
                TEMPLATE.read_text(),
                MEMCONSOLE_LISTEN=f"{LOOPBACK}:{port}",
                MEMCONSOLE_UPSTREAM=f"{LOOPBACK}:{upstream_port}",
            )
        )
        config = directory / "nginx.conf"
        config.write_text(main_config(directory, server_config))
        with (directory / "nginx.out").open("wb") as out:
            process = subprocess.Popen(
                [binary, "-p", str(directory), "-e", str(directory / "error.log"), "-c", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        nginx = cls(process, port, directory)
        nginx.wait_ready()
        return nginx

    def log(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")
            for name in ("nginx.out", "error.log")
            if (path := self.directory / name).exists()
        )

    def wait_ready(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"nginx exited {self.process.returncode}:\n{self.log()[-4000:]}")
            try:
                socket.create_connection((LOOPBACK, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"nginx did not listen within {timeout:.0f} s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # nginx's fast shutdown
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


# --- slow clients -------------------------------------------------------------------------------


def half_header(port: int) -> socket.socket:
    """A connection that has sent half a request header and then nothing."""
    sock = socket.create_connection((LOOPBACK, port), timeout=5)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow-")
    return sock


def half_body(port: int, token: str) -> socket.socket:
    """A connection that has sent a whole header for an API write and half its body, then nothing."""
    body = b'{"bot_uuid": "slow-bot", "session_name": "group_1", "content": "never finished"}'
    head = (
        "POST /api/v1/remember HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock = socket.create_connection((LOOPBACK, port), timeout=5)
    sock.sendall(head.encode() + body[: len(body) // 2])
    return sock


def still_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection open without having answered it."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer, or b"" for a closed connection
        return False
    except BlockingIOError:
        return True  # nothing to read and not closed: still waiting for the rest of the request
    except OSError:
        return False
    finally:
        sock.setblocking(True)
