"""The production path's front door (issue 15): nginx with the shipped config in front of gunicorn.

gunicorn's threads block on a client that sends its request slowly, so gunicorn must never face
clients. Here nginx (Debian's package, deploy/nginx.conf) runs in front of gunicorn (production
settings, SQLite, embedded Chroma, 1 worker with the default 4 threads): slow clients hold dozens of
connections open while /healthz and the API keep answering. Also here, with real gunicorn: what
gunicorn refuses itself (414, 431) and what nginx refuses (400, 413, 414) is answered in the API's
JSON error shape, and chunked API bodies reach the API as what they are.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.test import RequestFactory

from memconsole.console.middleware import client_ip

from .conftest import LOOPBACK, REPO, Client, Gunicorn, clean_env, manage, script_json
from .container_files import compose_environment
from .proxy import TEMPLATE, TEMPLATE_NAMES, Nginx, half_body, half_header, require_nginx, still_open

BOT = "proxy-bot"
SLOW_CONNECTIONS = 64  # half of them stop inside the header, half inside the body
ACCESS_LOG_FORMAT = "access %(m)s %(U)s %(s)s xff=%({x-forwarded-for}i)s"


@dataclass
class Site:
    server: Gunicorn
    token: str

    def api(self, port: int) -> Client:
        return Client(port)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Site]:
    tmp_path = tmp_path_factory.mktemp("proxy")
    env = clean_env(
        tmp_path,
        MEMCONSOLE_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(50),
        MEMCONSOLE_AUDIT_KEY=secrets.token_hex(32),
        MEMCONSOLE_FERNET_KEYS=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="127.0.0.1",
        MEMCONSOLE_BEHIND_PROXY="1",
        MEMCONSOLE_PROXY_COUNT="1",  # nginx is the one proxy in front: it faces the test's clients
        MEMCONSOLE_STATIC_ROOT=str(tmp_path / "static"),
        MEMCONSOLE_API_RATE_PER_MINUTE=100_000,
    )
    manage(env, "migrate", "--noinput", "-v", "0")
    token = script_json(env, "create_token.py", {"bot": BOT})["token"]
    server = Gunicorn.start(env, tmp_path / "gunicorn.log", "--access-logformat", ACCESS_LOG_FORMAT)
    try:
        server.wait_ready(workers=1)
        site = Site(server, token)
        remember(site, server.port, "warm-up: the model and the index are loaded before anything is timed")
        yield site
    finally:
        server.stop()


@pytest.fixture(scope="module")
def nginx(site, tmp_path_factory) -> Iterator[Nginx]:
    binary = require_nginx()
    proxy = Nginx.start(binary, tmp_path_factory.mktemp("nginx"), site.server.port)
    try:
        yield proxy
    finally:
        proxy.stop()


def remember(site: Site, port: int, content: str, session: str = "group_1") -> dict:
    response = Client(port).post_json(
        "/api/v1/remember", {"bot_uuid": BOT, "session_name": session, "content": content}, site.token
    )
    assert response.status == 201, (response.status, response.text[:500])
    return response.json()


def timed_get(port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 10) -> tuple[int, float]:
    """(status, seconds) of one GET on a new connection; status 0 when it timed out."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    started = time.monotonic()
    try:
        connection.request("GET", path, headers={"Host": "127.0.0.1", "X-Forwarded-Proto": "https", **(headers or {})})
        status = connection.getresponse().status
    except TimeoutError:
        status = 0
    finally:
        connection.close()
    return status, time.monotonic() - started


def raw_request(port: int, head: bytes, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; return the status, headers and body of the answer."""
    with socket.create_connection((LOOPBACK, port), timeout=30) as sock:
        sock.sendall(head + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def json_error(status: int, headers: dict[str, str], body: bytes) -> str:
    """The error code of a JSON error answer (failing the test when the answer is not one)."""
    assert headers.get("content-type", "").startswith("application/json"), (status, headers, body[:300])
    return json.loads(body)["error"]["code"]


# --- slow clients -------------------------------------------------------------------------------


def test_it_keeps_answering_while_slow_clients_hold_connections(site, nginx):
    profile = f"/api/v1/profile?bot_uuid={BOT}&session_name=group_1"
    auth = {"Authorization": f"Bearer {site.token}"}
    slow = [half_header(nginx.port) for _ in range(SLOW_CONNECTIONS // 2)]
    slow += [half_body(nginx.port, site.token) for _ in range(SLOW_CONNECTIONS // 2)]
    try:
        time.sleep(1.0)  # long enough for any of them to have reached and held a gunicorn thread
        answers = [timed_get(nginx.port, "/healthz") for _ in range(3)]
        answers += [timed_get(nginx.port, profile, auth) for _ in range(3)]
        written = remember(site, nginx.port, "written while 64 slow clients wait")
        held = sum(still_open(sock) for sock in slow)
    finally:
        for sock in slow:
            sock.close()

    assert [status for status, _ in answers] == [200] * len(answers)
    assert max(seconds for _, seconds in answers) < 1.0, answers
    assert written["episode_id"]
    assert held == SLOW_CONNECTIONS, f"only {held} of the slow connections were still held open"


def test_it_shows_why_gunicorn_must_never_face_clients(site):
    """The threat the proxy answers: gunicorn alone, with as few slow clients as it has threads."""
    slow = [half_header(site.server.port) for _ in range(8)]
    try:
        time.sleep(1.0)
        status, _seconds = timed_get(site.server.port, "/healthz", timeout=3)
    finally:
        for sock in slow:
            sock.close()
    assert status == 0, "gunicorn answered despite slow clients holding its threads: update docs/operations.md"
    deadline = time.monotonic() + 30
    while timed_get(site.server.port, "/healthz", timeout=2)[0] != 200:  # it recovers once they leave
        assert time.monotonic() < deadline, "gunicorn did not recover after the slow clients left"


# --- what the servers refuse themselves, in JSON --------------------------------------------------


def _headers(count: int) -> bytes:
    return b"".join(b"X-Filler-%d: x\r\n" % number for number in range(count))


def _get(path: str, extra: bytes = b"") -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra + b"\r\n"


def _post_head(path: str, extra: bytes) -> bytes:
    return (
        b"POST "
        + path.encode()
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + extra
        + b"\r\n"
    )


def test_it_answers_what_gunicorn_refuses_itself_in_json(site):
    port = site.server.port
    long_line = _get("/api/v1/profile?bot_uuid=" + "x" * 5000)
    assert raw_request(port, long_line)[0] == 414
    assert json_error(*raw_request(port, long_line)) == "uri_too_long"
    assert json_error(*raw_request(port, _get("/api/v1/profile", _headers(120)))) == "header_fields_too_large"
    status, headers, body = raw_request(port, _get("/api/v1/profile", _headers(120)))
    assert status == 431 and headers["cache-control"] == "no-store"
    assert b"<html" not in body.lower()


def test_it_answers_what_the_proxy_refuses_in_json_too(site, nginx):
    port = nginx.port
    cases = {
        "request line over gunicorn's limit": (_get("/api/v1/profile?bot_uuid=" + "x" * 5000), 414, "uri_too_long"),
        "request line over nginx's limit": (_get("/api/v1/profile?bot_uuid=" + "x" * 10000), 414, "uri_too_long"),
        "more headers than gunicorn takes": (_get("/api/v1/profile", _headers(120)), 431, "header_fields_too_large"),
        "a header over nginx's limit": (
            _get("/api/v1/profile", b"X-Big: " + b"x" * 9000 + b"\r\n"),
            400,
            "bad_request",
        ),
        "a body over nginx's limit": (
            _post_head("/api/v1/remember", b"Content-Length: 70000000\r\n"),
            413,
            "payload_too_large",
        ),
    }
    answers = {}
    for name, (head, _status, _code) in cases.items():
        status, headers, body = raw_request(port, head)
        answers[name] = (status, json_error(status, headers, body))
    assert answers == {name: (status, code) for name, (_head, status, code) in cases.items()}


# --- chunked request bodies -----------------------------------------------------------------------


def _chunked_post(port: int, path: str, body: bytes, token: str) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
    try:
        pieces = (body[start : start + 1000] for start in range(0, len(body), 1000))
        headers = {
            "Host": "127.0.0.1",
            "X-Forwarded-Proto": "https",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        }
        connection.request("POST", path, body=pieces, headers=headers, encode_chunked=True)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize("through", ["gunicorn", "nginx"])
def test_it_reads_chunked_api_bodies_as_their_content(site, through, request):
    port = request.getfixturevalue("nginx").port if through == "nginx" else site.server.port
    session = f"chunked_{through}"
    content = f"sent in chunks through {through}: " + " ".join(["tea"] * 600)
    body = json.dumps({"bot_uuid": BOT, "session_name": session, "content": content}).encode()

    status, answer = _chunked_post(port, "/api/v1/remember", body, site.token)
    assert status == 201, answer
    recall = json.dumps({"bot_uuid": BOT, "session_name": session, "query": "sent in chunks"}).encode()
    status, found = _chunked_post(port, "/api/v1/recall", recall, site.token)
    assert status == 200, found
    assert [hit["content"] for hit in found["episodes"]] == [content]

    too_big = json.dumps({"bot_uuid": BOT, "session_name": session, "content": "x" * 300_000}).encode()
    status, refused = _chunked_post(port, "/api/v1/remember", too_big, site.token)
    assert (status, refused["error"]["code"]) == (413, "payload_too_large")


@pytest.mark.parametrize("through", ["gunicorn", "nginx"])
def test_it_reads_chunked_mcp_bodies_as_their_content(site, through, request):
    """/mcp reads a body as the API does: sent in chunks, a tool call is answered (it was a JSON-RPC
    parse error of an empty body), and an oversized one is refused with 413."""
    port = request.getfixturevalue("nginx").port if through == "nginx" else site.server.port
    session = f"mcp_chunked_{through}"
    content = f"mcp chunks through {through}: " + " ".join(["jazz"] * 400)

    def call(tool: str, arguments: dict) -> tuple[int, dict]:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        return _chunked_post(port, "/mcp", json.dumps(message).encode(), site.token)

    status, stored = call("remember", {"bot_uuid": BOT, "session_name": session, "content": content})
    assert status == 200 and not stored["result"].get("isError"), stored
    status, found = call("recall", {"bot_uuid": BOT, "session_name": session, "query": "mcp chunks"})
    assert status == 200 and not found["result"].get("isError"), found
    assert content in json.dumps(found["result"], ensure_ascii=False)

    status, refused = call("remember", {"bot_uuid": BOT, "session_name": session, "content": "x" * 300_000})
    assert status == 413 and "over" in refused["error"]["message"], refused


# --- what reaches gunicorn from nginx --------------------------------------------------------------


def test_it_forwards_the_client_address_where_the_proxy_count_looks(site, nginx):
    """A forged X-Forwarded-For stays to the left of the address nginx appends, which is the entry
    MEMCONSOLE_PROXY_COUNT=1 picks for the login rate limit."""
    status, _ = timed_get(nginx.port, "/healthz?forwarded", {"X-Forwarded-For": "203.0.113.7"})
    assert status == 200
    deadline = time.monotonic() + 10  # gunicorn writes the access line after the answer
    while not (lines := [line for line in site.server.log().splitlines() if "203.0.113.7" in line]):
        assert time.monotonic() < deadline, site.server.log()[-2000:]
        time.sleep(0.1)
    forwarded = re.search(r"xff=(.*)$", lines[-1])[1]
    assert forwarded == "203.0.113.7, 127.0.0.1"

    request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(settings, "MEMCONSOLE_BEHIND_PROXY", True)
        patch.setattr(settings, "MEMCONSOLE_PROXY_COUNT", 1)
        assert client_ip(request) == "127.0.0.1"  # the peer nginx saw, never the forged entry


# --- the shipped files ---------------------------------------------------------------------------


def _directives(text: str, name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+([^;]+);", text, re.MULTILINE)


def _bytes(size: str) -> int:
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", size.strip())
    assert match, size
    number, unit = match.groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit.lower()]


def _seconds(value: str) -> int:
    match = re.fullmatch(r"(\d+)(s|m)?", value.strip())
    assert match, value
    number, unit = match.groups()
    return int(number) * (60 if unit == "m" else 1)


def test_it_ships_a_buffering_proxy_config_with_timeouts():
    text = TEMPLATE.read_text()
    assert set(re.findall(r"\$\{([A-Z_]+)\}", text)) == TEMPLATE_NAMES
    for timeout in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        values = _directives(text, timeout)
        assert values and _seconds(values[0]) <= 60, f"{timeout} must be set, to a minute at most"
    assert "off" not in _directives(text, "proxy_request_buffering") + _directives(text, "proxy_buffering")
    assert _directives(text, "proxy_set_header X-Forwarded-For") == ["$proxy_add_x_forwarded_for"]
    assert _directives(text, "proxy_set_header X-Forwarded-Proto")
    # The proxy never refuses a body the app accepts: the largest is an import upload.
    limit = _bytes(_directives(text, "client_max_body_size")[0])
    assert limit > settings.MEMCONSOLE_IMPORT_MAX_BYTES >= settings.MEMCONSOLE_API_MAX_BODY_BYTES
    assert limit > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert _directives(text, "listen") == ["${MEMCONSOLE_LISTEN}"]


def test_it_puts_nginx_in_front_of_gunicorn_in_compose(compose):
    services = compose["services"]
    proxy = services["proxy"]
    pinned = r"nginx:\d+\.\d+\.\d+-bookworm@sha256:[0-9a-f]{64}"
    assert re.fullmatch(pinned, proxy["image"]), "the official nginx image, pinned by version and digest"
    assert proxy["network_mode"] == "service:memconsole", "nginx shares memconsole's network, gunicorn stays local"
    mounted = {(config["source"], config["target"]) for config in proxy["configs"]}
    assert ("nginx-template", "/etc/nginx/templates/default.conf.template") in mounted
    assert compose["configs"]["nginx-template"]["file"] == "./deploy/nginx.conf"
    environment = compose_environment(proxy)
    assert environment["MEMCONSOLE_UPSTREAM"] == "127.0.0.1:8000"
    # gunicorn listens on loopback inside the shared network namespace: only nginx reaches it.
    command = services["memconsole"]["command"]
    assert command[command.index("--bind") + 1] == "127.0.0.1:8000"
    published = {port.rsplit(":", 1)[1] for port in services["memconsole"]["ports"]}
    assert published == {environment["MEMCONSOLE_LISTEN"]}, "what is published is nginx, never gunicorn"
    # A TLS proxy in front of nginx, and nginx: two entries appended to X-Forwarded-For.
    assert compose_environment(services["memconsole"])["MEMCONSOLE_PROXY_COUNT"] == "2"


def test_it_says_make_run_is_for_one_machine_and_ci_installs_nginx():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^HOST \?= 127\.0\.0\.1$", makefile, re.MULTILINE)
    run_recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "one machine" in run_recipe and "deploy/nginx.conf" in run_recipe
    ci = (REPO / ".ci" / "run").read_text()
    assert "command -v nginx" in ci and re.search(r"apt-get install .*\bnginx\b", ci)
