"""Production settings, the login rate limit, and secrets that must never reach logs or the audit log.

The production values are read from settings.py itself, in a subprocess started with
MEMCONSOLE_ENV=production (as a deployment would), then applied here with override_settings to
check the cookies and headers the console and the API really send. `manage.py check --deploy`
must be clean with those settings.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import subprocess

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client, override_settings

from memconsole.memory.models import AuditEntry, BotToken
from memconsole.memory.roles import ADMIN, VIEWER
from tests.conftest import PASSWORD
from tests.processes import run_script

from .conftest import MANAGE, PYTHON, REPO, SCRIPTS, clean_env, record_figure

pytestmark = pytest.mark.django_db

SECURITY_SETTINGS = [
    "DEBUG",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE",
    "CSRF_COOKIE_SAMESITE",
    "SECURE_SSL_REDIRECT",
    "SECURE_REDIRECT_EXEMPT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "SECURE_REFERRER_POLICY",
    "SECURE_CROSS_ORIGIN_OPENER_POLICY",
    "X_FRAME_OPTIONS",
    "SESSION_COOKIE_AGE",
]


def production_env(tmp_path, **extra) -> dict[str, str]:
    return clean_env(
        MEMCONSOLE_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="memory.example.org",
        DEBUG="0",
        MEMCONSOLE_VAR_DIR=tmp_path / "var",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **extra,
    )


@pytest.fixture(scope="module")
def production_settings(tmp_path_factory) -> dict:
    tmp_path = tmp_path_factory.mktemp("production")
    result = run_script(SCRIPTS / "settings_values.py", production_env(tmp_path), SECURITY_SETTINGS, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_it_passes_check_deploy_with_production_settings(tmp_path):
    result = subprocess.run(
        [PYTHON, str(MANAGE), "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_turns_on_every_protection_in_production(production_settings):
    s = production_settings
    assert s["DEBUG"] is False
    assert s["SESSION_COOKIE_SECURE"] and s["CSRF_COOKIE_SECURE"] and s["SESSION_COOKIE_HTTPONLY"]
    assert s["SESSION_COOKIE_SAMESITE"] == s["CSRF_COOKIE_SAMESITE"] == "Lax"
    assert s["SECURE_SSL_REDIRECT"] and s["SECURE_HSTS_SECONDS"] >= 31536000
    assert s["SECURE_CONTENT_TYPE_NOSNIFF"] and s["X_FRAME_OPTIONS"] == "DENY"


@pytest.fixture
def production(production_settings, settings, viewer):
    with override_settings(**{**production_settings, "ALLOWED_HOSTS": ["testserver"]}):
        yield production_settings


def test_it_sends_secure_cookies_and_security_headers(production, viewer):
    client = Client()
    page = client.get("/accounts/login/", secure=True)
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["X-Frame-Options"] == "DENY"
    assert page["Referrer-Policy"] == "same-origin"
    assert page["Cross-Origin-Opener-Policy"] == "same-origin"
    csrf = page.cookies["csrftoken"]
    assert csrf["secure"] and csrf["samesite"] == "Lax"

    login = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD}, secure=True)
    assert login.status_code == 302
    session = login.cookies["sessionid"]
    assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"
    assert int(session["max-age"]) == production["SESSION_COOKIE_AGE"]

    console = client.get("/", secure=True)
    assert console.status_code == 200
    assert "no-store" in console["Cache-Control"] and "private" in console["Cache-Control"]
    api = client.get("/api/v1/openapi.json", secure=True)
    assert api["Cache-Control"] == "no-store" and api["X-Content-Type-Options"] == "nosniff"
    record_figure("permissions", "security_headers_checked", 9)


def test_it_redirects_plain_http_except_the_probes(production):
    client = Client()
    response = client.get("/accounts/login/")
    assert response.status_code == 301 and response["Location"] == "https://testserver/accounts/login/"
    assert client.get("/api/v1/openapi.json").status_code == 301
    assert client.get("/healthz").status_code == 200  # load balancers probe over plain HTTP
    assert client.get("/readyz").status_code == 200


def test_it_shows_no_debug_page_in_production(production, viewer_client):
    for path in ("/no/such/page/", "/scopes/999999/episodes/"):
        response = viewer_client.get(path, secure=True)
        assert response.status_code == 404
        body = response.content.decode()
        assert "URLconf" not in body and "Traceback" not in body and "DEBUG = True" not in body


# --- the login rate limit -----------------------------------------------------------------------


def login(client: Client, username: str, password: str, ip: str = "203.0.113.7"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_it_locks_out_an_account_from_an_ip_after_five_failures(viewer, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    other = User.objects.create_user("other", password=PASSWORD)
    other.groups.add(Group.objects.get(name=VIEWER))
    for attempt in range(4):
        response = login(Client(), "viewer", f"wrong-{attempt}")
        assert response.status_code == 200, attempt  # the form again, with an error
    assert login(Client(), "viewer", "wrong-4").status_code == 429  # the fifth failure locks
    locked = login(Client(), "viewer", PASSWORD)
    assert locked.status_code == 429  # even the right password: locked out
    assert login(Client(), "viewer", PASSWORD, ip="198.51.100.9").status_code == 302  # same account, other IP
    assert login(Client(), "other", PASSWORD).status_code == 302  # other account, same IP
    assert (
        Client()
        .post("/admin/login/", {"username": "viewer", "password": PASSWORD}, REMOTE_ADDR="203.0.113.7")
        .status_code
        == 429
    )  # the admin login shares the limit
    attempt = AccessAttempt.objects.get(username="viewer", ip_address="203.0.113.7")
    assert attempt.failures_since_start >= 5
    for n in range(5):
        assert f"wrong-{n}" not in attempt.post_data  # axes masks the password it records
    record_figure("permissions", "login_rate_limit_attempts", 9)


# --- secrets in logs and audit ------------------------------------------------------------------


def test_it_never_writes_passwords_or_tokens_to_logs_or_the_audit_log(caplog, settings):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 10**6
    caplog.set_level(logging.DEBUG)
    for name in ("memconsole", "django", "django.request", "django.security", "axes"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    password, new_password = "Sesame-" + secrets.token_urlsafe(12), "Sesame-" + secrets.token_urlsafe(12)
    admin = User.objects.create_user("secret-keeper", password=password)
    admin.groups.add(Group.objects.get(name=ADMIN))

    # Console: failed logins up to the lockout, a good login elsewhere, a password change.
    for _ in range(6):
        login(Client(), "secret-keeper", password[::-1])
    login(Client(), "secret-keeper", password[::-1] + "x", ip="198.51.100.20")
    client = Client()
    assert login(client, "secret-keeper", password, ip="198.51.100.10").status_code == 302
    change = client.post(
        "/accounts/password_change/",
        {"old_password": password, "new_password1": new_password, "new_password2": new_password},
        REMOTE_ADDR="198.51.100.10",
    )
    assert change.status_code == 302

    # Bot API: a token made by the command, used well and badly, then revoked and used again.
    out = io.StringIO()
    call_command("create_bot_token", "log check", "--bot", "bot-a", stdout=out, stderr=io.StringIO())
    secret = out.getvalue().strip()
    api = Client()
    body = json.dumps({"bot_uuid": "bot-a", "session_name": "group_1", "content": "a fact"})
    calls = [
        (secret, body, 201),
        (secret, json.dumps({"bot_uuid": "bot-b", "session_name": "group_1", "content": "x"}), 403),
        (secret, '{"bot_uuid": "bot-a", "session_name": "group_1", "content": ""}', 422),
        (secret, "{not json", 400),
        (secret[:-2] + "xx", body, 401),
    ]
    for token, data, status in calls:
        response = api.post(
            "/api/v1/remember", data=data, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == status
    prefix = BotToken.objects.get(name="log check").prefix
    call_command("revoke_bot_token", prefix, stdout=io.StringIO(), stderr=io.StringIO())
    assert (
        api.post(
            "/api/v1/remember",
            data=body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {secret}"},
        ).status_code
        == 401
    )

    secret_part = secret.split("_", 2)[2]
    forbidden = {
        "password": password,
        "new password": new_password,
        "wrong password": password[::-1],
        "token": secret,
        "token secret": secret_part,
    }
    assert caplog.records, "nothing was logged at all: the capture is not working"
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    audit = "\n".join(
        json.dumps(entry.payload)
        + " ".join(str(getattr(entry, f)) for f in ("actor", "target_id", "sender_id", "query_id"))
        for entry in AuditEntry.objects.all()
    )
    axes = "\n".join(f"{a.post_data} {a.get_data}" for a in AccessAttempt.objects.all())
    axes += "\n".join(
        f"{a.path_info} {a.user_agent}" for a in (*AccessLog.objects.all(), *AccessFailureLog.objects.all())
    )
    tokens_table = "\n".join(f"{t.name} {t.prefix} {t.token_hash}" for t in BotToken.objects.all())
    for what, value in forbidden.items():
        assert value not in logged, f"the {what} is in the logs"
        assert value not in audit, f"the {what} is in the audit log"
        assert value not in axes, f"the {what} is in the login-attempt records"
        assert value not in tokens_table, f"the {what} is stored in the token table"
    assert AuditEntry.objects.filter(operation__in=["token_create", "token_revoke"]).count() == 2
    record_figure("permissions", "secret_leak_checks", len(forbidden) * 4)
