"""gunicorn with memconsole's config: one worker only with the embedded index, refused clearly otherwise
(issue 8 item 2); connections it is about to close are said to close."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time

from memconsole import gunicorn_config

from .conftest import GUNICORN, LOOPBACK, REPO, Gunicorn, clean_env


def _start_embedded(tmp_path, *args: str, **settings) -> subprocess.CompletedProcess:
    env = clean_env(tmp_path, **settings)
    return subprocess.run(
        [
            str(GUNICORN),
            "memconsole.wsgi",
            "--config",
            "python:memconsole.gunicorn_config",
            "--bind",
            f"{LOOPBACK}:0",
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_refuses_four_workers_with_the_embedded_index(tmp_path):
    result = _start_embedded(tmp_path, WEB_CONCURRENCY=4)

    assert result.returncode == gunicorn_config.EMBEDDED_INDEX_EXIT_CODE
    assert "4 workers need a Chroma server" in result.stderr
    assert "CHROMA_HOST" in result.stderr and "WEB_CONCURRENCY=1" in result.stderr
    assert "Booting worker" not in result.stderr  # refused before any worker started


def test_it_refuses_workers_given_on_the_command_line_too(tmp_path):
    result = _start_embedded(tmp_path, "--workers", "3")

    assert result.returncode == gunicorn_config.EMBEDDED_INDEX_EXIT_CODE
    assert "3 workers need a Chroma server" in result.stderr


def test_it_accepts_several_workers_once_a_chroma_server_is_named():
    assert gunicorn_config.check_embedded_index(4, "chroma.internal") is None
    assert gunicorn_config.check_embedded_index(1, "") is None
    assert gunicorn_config.check_embedded_index(2, "") is not None


def test_it_reads_the_chroma_host_from_a_file_as_settings_do(tmp_path, monkeypatch):
    host_file = tmp_path / "chroma_host"
    host_file.write_text("chroma.internal\n")
    monkeypatch.delenv("CHROMA_HOST", raising=False)
    monkeypatch.setenv("CHROMA_HOST_FILE", str(host_file))
    assert gunicorn_config.chroma_server_configured()
    host_file.write_text("")
    assert not gunicorn_config.chroma_server_configured()


def test_it_stays_at_one_worker_when_asked_for_more_at_runtime(tmp_path):
    server = Gunicorn.start(clean_env(tmp_path), tmp_path / "gunicorn.log")
    try:
        server.wait_ready(workers=1)
        server.process.send_signal(signal.SIGTTIN)  # gunicorn's "one more worker"
        deadline = time.monotonic() + 15
        while "Staying at 1 worker" not in server.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # give a wrongly spawned worker the time to boot

        assert "2 workers need a Chroma server" in server.log()
        assert len(server.worker_pids()) == 1
    finally:
        server.stop()


def test_a_refused_large_body_closes_the_connection_and_the_client_goes_on(tmp_path):
    """A 413 is sent before the body is read; gunicorn then closes the connection: it must say so
    (`Connection: close`), or the client's next request on it fails with "server disconnected"."""
    server = Gunicorn.start(clean_env(tmp_path), tmp_path / "gunicorn.log")
    try:
        server.wait_ready(workers=1)
        connection = http.client.HTTPConnection(LOOPBACK, server.port, timeout=30)
        body = json.dumps({"content": "x" * 300_000}).encode()
        headers = {"Content-Type": "application/json", "Authorization": "Bearer mc_not_a_token"}
        for _ in range(3):
            connection.request("POST", "/api/v1/remember", body=body, headers=headers)
            refused = connection.getresponse()
            refused.read()
            assert refused.status in (401, 413) and refused.getheader("Connection") == "close"
            connection.request("GET", "/healthz")  # http.client reconnects after a "close"
            answer = connection.getresponse()
            assert answer.status == 200 and answer.getheader("Connection") != "close"
            answer.read()
        connection.close()
    finally:
        server.stop()


def test_a_refused_body_still_being_sent_is_read_to_its_end_and_the_answer_kept(tmp_path):
    """nginx goes on sending a request's body after the answer came: a body refused unread (413 by
    its size, 401) is read to its end before the connection closes. Closing a socket with unread
    bytes sends a TCP reset, and the sender's next write fails; nginx then answers 502 instead of
    the refusal (it read only gunicorn's own 64 KiB before)."""
    server = Gunicorn.start(clean_env(tmp_path), tmp_path / "gunicorn.log")
    try:
        server.wait_ready(workers=1)
        body = json.dumps({"bot_uuid": "b", "session_name": "s", "content": "x" * 3_000_000}).encode()
        head = (
            f"POST /api/v1/remember HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer mc_not_a_token\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        for _ in range(2):
            with socket.create_connection((LOOPBACK, server.port), timeout=30) as sock:
                sock.sendall(head + body[:100_000])
                assert sock.recv(1, socket.MSG_PEEK), "no answer to a refused body"  # waits for the answer
                time.sleep(0.3)  # the server has answered and drained what it drains by itself
                sock.sendall(body[100_000:])  # the rest, as a proxy sends it (a reset fails this)
                response = http.client.HTTPResponse(sock)
                response.begin()
                assert response.status in (401, 413), response.status
                assert json.loads(response.read())["error"]["code"]
    finally:
        server.stop()
