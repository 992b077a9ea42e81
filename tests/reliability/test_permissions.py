"""The permissions matrix: every URL of the project × every kind of caller, with the expected answer.

Rows are keyed by the URL's route as the resolver spells it, and the test first checks that every
route of `memconsole.urls` (console, bot API, probes, accounts, i18n and the Django admin) has a
row, so a new URL without a row fails here. Callers: anonymous; a bot token for another bot;
a viewer; an operator limited to another bot ("no grant for this bot"); an operator; an admin
(staff, for the Django admin); and, for the bot API, a token for this bot (the positive case).
Each cell is a fresh client; cells are collected and every mismatch reported together.

Expected values: a status code, or LOGIN (302 to the console login), ADMIN_LOGIN (302 to the
admin login) or REDIRECT (302 anywhere else, i.e. the action ran and redirected).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from memconsole.memory import episodes, injection, jobs, profiles, tokens
from memconsole.memory.models import AuditEntry, BotGrant, BotToken, Scope
from memconsole.memory.roles import ADMIN, OPERATOR, VIEWER
from memconsole.memory.scopes import derive_scope
from tests.conftest import PASSWORD

from .conftest import record_figure

pytestmark = pytest.mark.django_db

LOGIN, ADMIN_LOGIN, REDIRECT = "login", "admin_login", "redirect"
CALLERS = ("anonymous", "other_token", "viewer", "ungranted", "operator", "admin")
API_CALLERS = (*CALLERS, "own_token")


def every_route() -> set[str]:
    routes = set()

    def walk(resolver: URLResolver, prefix: str) -> None:
        for pattern in resolver.url_patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                routes.add(prefix + str(pattern.pattern))

    walk(get_resolver(), "")
    return routes


@dataclass(frozen=True)
class Row:
    route: str
    method: str
    path: str  # with {placeholders} filled from the world
    expected: tuple  # one per caller, in CALLERS (or API_CALLERS) order
    data: Any = None
    api: bool = False


def row(route: str, method: str, path: str, *expected: Any, data: Any = None) -> Row:
    assert len(expected) == len(CALLERS), route
    return Row(route, method, path, tuple(expected), data)


def api_row(
    route: str, method: str, path: str, own: Any, data: Any = None, *, open_: bool = False, status: int = 0
) -> Row:
    # open_: no token needed, the same answer for everyone. Otherwise a console session is no API
    # credential, and another bot's token is refused for this bot.
    expected = (status,) * len(API_CALLERS) if open_ else (401, 403, 401, 401, 401, 401, own)
    return Row(route, method, path, expected, data, api=True)


S = "scopes/<int:scope_id>/"
E = S + "episodes/<episode:episode_id>/"
SCOPE_BODY = {"bot_uuid": "bot-a", "session_name": "group_100"}

CONSOLE_ROWS = [
    #                                                                 anon   token  viewer ungrant oper   admin
    row("", "get", "/", LOGIN, LOGIN, 200, 200, 200, 200),
    row(
        "scopes/open/",
        "post",
        "/scopes/open/",
        LOGIN,
        LOGIN,
        REDIRECT,
        404,
        REDIRECT,
        REDIRECT,
        data={**SCOPE_BODY, "isolation": "session"},
    ),
    row(S, "get", "/scopes/{scope}/", LOGIN, LOGIN, REDIRECT, 404, REDIRECT, REDIRECT),
    row(S + "profiles/", "get", "/scopes/{scope}/profiles/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        S + "profiles/<str:profile_type>/", "get", "/scopes/{scope}/profiles/session/", LOGIN, LOGIN, 200, 404, 200, 200
    ),
    row(
        S + "profiles/<str:profile_type>/edit/",
        "post",
        "/scopes/{scope}/profiles/session/edit/",
        LOGIN,
        LOGIN,
        403,
        404,
        REDIRECT,
        REDIRECT,
        data={"name": "Group", "traits": "", "preferences": "", "notes": ""},
    ),
    row(
        S + "profiles/<str:profile_type>/rollback/",
        "post",
        "/scopes/{scope}/profiles/session/rollback/",
        LOGIN,
        LOGIN,
        403,
        404,
        REDIRECT,
        REDIRECT,
        data={"version": "1"},
    ),
    row(S + "episodes/", "get", "/scopes/{scope}/episodes/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        S + "episodes/bulk/",
        "post",
        "/scopes/{scope}/episodes/bulk/",
        LOGIN,
        LOGIN,
        403,
        404,
        200,
        200,
        data={"action": "archive", "episode_ids": "{episode}"},
    ),
    # Bulk by filter (issue 17): every episode the list's filters match; deleting needs the delete role.
    row(
        S + "episodes/bulk/",
        "post",
        "/scopes/{scope}/episodes/bulk/",
        LOGIN,
        LOGIN,
        403,
        404,
        403,
        200,
        data={"action": "delete", "select": "matching", "filter_query": "status=all"},
    ),
    row(S + "episodes/", "get", "/scopes/{scope}/episodes/?sort=importance&cursor=z", LOGIN, LOGIN, 200, 404, 200, 200),
    row(S + "speakers/", "get", "/scopes/{scope}/speakers/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(E, "get", "/scopes/{scope}/episodes/{episode}/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        E + "archive/",
        "post",
        "/scopes/{scope}/episodes/{episode}/archive/",
        LOGIN,
        LOGIN,
        403,
        404,
        REDIRECT,
        REDIRECT,
    ),
    row(
        E + "restore/",
        "post",
        "/scopes/{scope}/episodes/{episode}/restore/",
        LOGIN,
        LOGIN,
        403,
        404,
        REDIRECT,
        REDIRECT,
    ),
    # Without "confirmed" the delete view asks first: the permission is checked before it asks.
    row(E + "delete/", "post", "/scopes/{scope}/episodes/{episode}/delete/", LOGIN, LOGIN, 403, 404, 403, 200),
    # Editing memory by hand, finding people, spaces, the time zone (issue 17, H6).
    row(E + "edit/", "get", "/scopes/{scope}/episodes/{episode}/edit/", LOGIN, LOGIN, 403, 404, 200, 200),
    row(
        E + "edit/",
        "post",
        "/scopes/{scope}/episodes/{episode}/edit/",
        *(LOGIN, LOGIN, 403, 404, REDIRECT, REDIRECT),
        data={"content": "Alice likes green tea", "tags": "", "importance": "3", "sender_id": "u1"},
    ),
    row(
        E + "speaker/",
        "post",
        "/scopes/{scope}/episodes/{episode}/speaker/",
        *(LOGIN, LOGIN, 403, 404, REDIRECT, REDIRECT),
        data={"speaker": "u1"},
    ),
    row(S + "episodes/new/", "get", "/scopes/{scope}/episodes/new/", LOGIN, LOGIN, 403, 404, 200, 200),
    row(
        S + "episodes/new/",
        "post",
        "/scopes/{scope}/episodes/new/",
        *(LOGIN, LOGIN, 403, 404, REDIRECT, REDIRECT),
        data={"content": "Added by hand", "importance": "2"},
    ),
    row(
        "scopes/new/episode/",
        "post",
        "/scopes/new/episode/",
        *(LOGIN, LOGIN, 403, 404, REDIRECT, REDIRECT),
        data={**SCOPE_BODY, "session_name": "person_77", "isolation": "session", "content": "First", "importance": "2"},
    ),
    # The space holds memory: an admin is refused with the reason (400), nothing removed.
    row(S + "remove/", "post", "/scopes/{scope}/remove/", LOGIN, LOGIN, 403, 404, 403, 400),
    row("timezone/", "get", "/timezone/", LOGIN, LOGIN, 200, 200, 200, 200),
    row("timezone/", "post", "/timezone/", LOGIN, LOGIN, REDIRECT, REDIRECT, REDIRECT, REDIRECT, data={"zone": "UTC"}),
    row(S + "injection/", "get", "/scopes/{scope}/injection/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        S + "injection/<snapshot:snapshot_id>/",
        "get",
        "/scopes/{scope}/injection/{snapshot}/",
        LOGIN,
        LOGIN,
        200,
        404,
        200,
        200,
    ),
    row(S + "insights/", "get", "/scopes/{scope}/insights/", LOGIN, LOGIN, 200, 404, 200, 200),  # issue 18
    row(S + "known-at/", "get", "/scopes/{scope}/known-at/?at=2026-01-01T10:00", LOGIN, LOGIN, 200, 404, 200, 200),
    row(S + "insights.csv", "get", "/scopes/{scope}/insights.csv", LOGIN, LOGIN, 200, 404, 200, 200),
    row("bots/insights/", "get", "/bots/insights/?bot=bot-a", LOGIN, LOGIN, 200, 404, 200, 200),
    row("bots/insights.csv", "get", "/bots/insights.csv?bot=bot-a", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        S + "injection/<snapshot:snapshot_id>/replay/",
        "get",
        "/scopes/{scope}/injection/{snapshot}/replay/",
        LOGIN,
        LOGIN,
        200,
        404,
        200,
        200,
    ),  # issue 18
    row(
        S + "injection/<snapshot:snapshot_id>/fix/",
        "post",
        "/scopes/{scope}/injection/{snapshot}/fix/",
        LOGIN,
        LOGIN,
        403,
        404,
        REDIRECT,
        400,  # allowed, but the operator archived it just before: "already archived", nothing claimed
        data={"episode_id": "{episode}", "action": "archive", "reason": "wrong person"},
    ),
    row(S + "audit/", "get", "/scopes/{scope}/audit/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(S + "audit/export/", "post", "/scopes/{scope}/audit/export/", LOGIN, LOGIN, 403, 404, 403, 200),
    row(S + "export/", "get", "/scopes/{scope}/export/", LOGIN, LOGIN, 200, 404, 200, 200),
    row(
        S + "export/download/",
        "post",
        "/scopes/{scope}/export/download/",
        LOGIN,
        LOGIN,
        403,
        404,
        403,
        200,
        data={"statuses": ["active"]},
    ),
    row("import/", "get", "/import/", LOGIN, LOGIN, 403, 403, 403, 200),
    row("erasure/", "get", "/erasure/", LOGIN, LOGIN, 403, 403, 403, 200),
    row("erasure/", "post", "/erasure/", LOGIN, LOGIN, 403, 403, 403, 200, data={"sender_id": "u1", "bot_uuid": ""}),
    row("erasure/run/", "post", "/erasure/run/", LOGIN, LOGIN, 403, 403, 403, 400, data={}),
    row("diagnostics/", "get", "/diagnostics/", LOGIN, LOGIN, 200, 200, 200, 200),
    # Background jobs (issue 21): a start redirects to the job page; one health check (index repair)
    # at a time, so the callers after the first one that may start it get 409 while it is queued.
    row("diagnostics/run/", "post", "/diagnostics/run/", LOGIN, LOGIN, 403, REDIRECT, 409, 409),
    row("diagnostics/reindex/", "post", "/diagnostics/reindex/", LOGIN, LOGIN, 403, 403, REDIRECT, 409),
    row("diagnostics/reembed/", "post", "/diagnostics/reembed/", LOGIN, LOGIN, 403, 403, REDIRECT, 409),
    # Re-encryption is the admin's alone; with no MEMCONSOLE_FERNET_KEYS (this world) it is refused as pointless.
    row("diagnostics/rotate-keys/", "post", "/diagnostics/rotate-keys/", LOGIN, LOGIN, 403, 403, 403, 400),
    row("jobs/<uuid:job_id>/", "get", "/jobs/{job}/", LOGIN, LOGIN, 403, 404, 403, 200),  # an import into bot-a
]
IMPORT_POST = row(
    "import/", "post", "/import/", LOGIN, LOGIN, 403, 403, 403, REDIRECT
)  # a dry run's job; data per cell

OTHER_ROWS = [
    row("healthz", "get", "/healthz", 200, 200, 200, 200, 200, 200),
    row("readyz", "get", "/readyz", 200, 200, 200, 200, 200, 200),
    # Prometheus; with no MEMCONSOLE_METRICS_TOKEN nor MEMCONSOLE_METRICS_ALLOW it does not exist.
    row("metrics", "get", "/metrics", 404, 404, 404, 404, 404, 404),
    row("accounts/login/", "get", "/accounts/login/", 200, 200, 200, 200, 200, 200),
    # An empty form: shown again with errors (and no failed login counted against the rate limit).
    row(
        "accounts/login/",
        "post",
        "/accounts/login/",
        200,
        200,
        200,
        200,
        200,
        200,
        data={"username": "", "password": ""},
    ),
    row("accounts/logout/", "post", "/accounts/logout/", LOGIN, LOGIN, LOGIN, LOGIN, LOGIN, LOGIN),
    row("accounts/password_change/", "get", "/accounts/password_change/", LOGIN, LOGIN, 200, 200, 200, 200),
    row("accounts/password_change/done/", "get", "/accounts/password_change/done/", LOGIN, LOGIN, 200, 200, 200, 200),
    row(
        "i18n/setlang/",
        "post",
        "/i18n/setlang/",
        REDIRECT,
        REDIRECT,
        REDIRECT,
        REDIRECT,
        REDIRECT,
        REDIRECT,
        data={"language": "es", "next": "/"},
    ),
]

API_ROWS = [
    api_row("api/v1/remember", "post", "/api/v1/remember", 201, {**SCOPE_BODY, "content": "Alice likes tea"}),
    api_row("api/v1/recall", "post", "/api/v1/recall", 200, {**SCOPE_BODY, "query": "tea"}),
    api_row("api/v1/profile", "get", "/api/v1/profile?bot_uuid=bot-a&session_name=group_100", 200),
    api_row("api/v1/profile", "post", "/api/v1/profile", 200, {**SCOPE_BODY, "add_traits": ["kind"]}),
    api_row("api/v1/inject", "post", "/api/v1/inject", 200, {**SCOPE_BODY, "query": "tea"}),
    api_row("api/v1/forget", "post", "/api/v1/forget", 200, {**SCOPE_BODY, "episode_id": "{forget}"}),
    api_row("api/v1/sessions", "get", "/api/v1/sessions?bot_uuid=bot-a", 200),  # issue 20
    api_row("api/v1/facts", "post", "/api/v1/facts", 200, {**SCOPE_BODY, "subject": "u1", "key": "k", "value": "v"}),
    api_row("api/v1/facts", "get", "/api/v1/facts?bot_uuid=bot-a&session_name=group_100&subject=u1", 200),
    api_row("api/v1/facts/forget", "post", "/api/v1/facts/forget", 404, {**SCOPE_BODY, "subject": "u9", "key": "k"}),
    api_row("api/v1/messages", "post", "/api/v1/messages", 201, {**SCOPE_BODY, "role": "user", "content": "hi"}),
    api_row("api/v1/messages", "get", "/api/v1/messages?bot_uuid=bot-a&session_name=group_100", 200),
    api_row("api/v1/episodes", "get", "/api/v1/episodes?bot_uuid=bot-a&session_name=group_100", 200),  # issue 20
    api_row("api/v1/export", "get", "/api/v1/export?bot_uuid=bot-a&session_name=group_100", 200),
    api_row(
        "api/v1/snapshots/<snapshot_id>",
        "get",
        "/api/v1/snapshots/{snapshot}?bot_uuid=bot-a&session_name=group_100",
        200,
    ),  # issue 18
    api_row("api/v1/openapi.json", "get", "/api/v1/openapi.json", None, open_=True, status=200),
    api_row("api/v1/docs", "get", "/api/v1/docs", None, open_=True, status=200),
    api_row("api/v1/^.*$", "get", "/api/v1/nothing/here", None, open_=True, status=404),
    api_row("^api(/|$)", "post", "/api/v2/remember", None, open_=True, status=404),
    # MCP: the same bot tokens. Listing tools needs no bot, so another bot's token lists them too;
    # its tool calls for bot-a are refused inside the answer (tests/mcp).
    Row(
        "mcp",
        "post",
        "/mcp",
        (401, 200, 401, 401, 401, 401, 200),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        api=True,
    ),
    Row("mcp", "get", "/mcp", (405,) * len(API_CALLERS), None, api=True),
    Row(  # the same endpoint as a client may spell it
        "mcp/",
        "post",
        "/mcp/",
        (401, 200, 401, 401, 401, 401, 200),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        api=True,
    ),
]

# The Django admin: only staff get past the login; then the model permissions of the admin role.
# Per model: the admin role's answer for changelist, add, history, delete, change, and the bare
# object URL (a redirect to change). Non-staff callers get ADMIN_LOGIN for all of it.
ADMIN_MODELS = {
    "auth/group": ("{group}", 200, 403, 200, 403, 200),
    "auth/user": ("{user}", 200, 200, 200, 200, 200),
    "axes/accessattempt": ("{attempt}", 403, 403, 403, 403, 403),
    "axes/accesslog": ("{accesslog}", 403, 403, 403, 403, 403),
    "axes/accessfailurelog": ("{failurelog}", 403, 403, 403, 403, 403),
    "memory/bottoken": ("{token}", 200, 403, 200, 403, 200),  # created by a command; revoked, never deleted
    "memory/botgrant": ("{grant}", 200, 403, 200, 403, 200),  # read-only: the console changes grants, audited
    "memory/scope": ("{scope}", 200, 403, 200, 403, 200),  # read-only
    "memory/auditentry": ("{audit}", 403, 403, 403, 403, 403),  # superusers only (payloads stay in the console)
}


def user_form(username: str, *, staff: bool) -> dict[str, Any]:
    """The Django admin's user change form, asking for every privilege there is."""
    return {
        "username": username,
        "is_active": "on",
        **({"is_staff": "on"} if staff else {}),
        "is_superuser": "on",
        "groups": ["{admin_group}"],
        "user_permissions": ["{permission}"],
        "date_joined_0": "2025-01-01",
        "date_joined_1": "00:00:00",
    }


def admin_rows() -> list[Row]:
    def staff_only(route: str, method: str, path: str, admin: Any, data: Any = None) -> Row:
        return row(
            route, method, path, ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, ADMIN_LOGIN, admin, data=data
        )

    rows = [
        staff_only("admin/", "get", "/admin/", 200),
        row("admin/login/", "get", "/admin/login/", 200, 200, 200, 200, 200, REDIRECT),
        # Logging out is open to anyone (it only ends the caller's own session).
        row("admin/logout/", "post", "/admin/logout/", REDIRECT, REDIRECT, REDIRECT, REDIRECT, REDIRECT, LOGIN),
        staff_only("admin/password_change/", "get", "/admin/password_change/", 200),
        staff_only("admin/password_change/done/", "get", "/admin/password_change/done/", 200),
        staff_only("admin/autocomplete/", "get", "/admin/autocomplete/", 403),
        staff_only("admin/jsi18n/", "get", "/admin/jsi18n/", 200),
        staff_only("admin/r/<path:content_type_id>/<path:object_id>/", "get", "/admin/r/999/999/", 404),
        staff_only("admin/^(?P<app_label>axes|memory|auth)/$", "get", "/admin/memory/", 200),
        staff_only("admin/(?P<url>.*)$", "get", "/admin/no/such/page/", 404),
        staff_only("admin/auth/user/<id>/password/", "get", "/admin/auth/user/{user}/password/", 200),
        # A console admin is no superuser: a superuser's account is view-only for it (no password, no
        # delete), and saving its own account leaves its privileges as they were (ESCALATION below).
        staff_only("admin/auth/user/<id>/password/", "get", "/admin/auth/user/{superuser}/password/", 403),
        staff_only("admin/auth/user/<path:object_id>/change/", "get", "/admin/auth/user/{superuser}/change/", 200),
        staff_only("admin/auth/user/<path:object_id>/change/", "post", "/admin/auth/user/{superuser}/change/", 403),
        staff_only("admin/auth/user/<path:object_id>/delete/", "get", "/admin/auth/user/{superuser}/delete/", 403),
        staff_only(
            "admin/auth/user/<path:object_id>/change/",
            "post",
            "/admin/auth/user/{admin}/change/",
            REDIRECT,
            data=user_form("m-admin", staff=True),
        ),
    ]
    for model, (obj, changelist, add, history, delete, change) in ADMIN_MODELS.items():
        base = f"admin/{model}/"
        rows += [
            staff_only(base, "get", f"/{base}", changelist),
            staff_only(base + "add/", "get", f"/{base}add/", add),
            staff_only(base + "<path:object_id>/history/", "get", f"/{base}{obj}/history/", history),
            staff_only(base + "<path:object_id>/delete/", "get", f"/{base}{obj}/delete/", delete),
            staff_only(base + "<path:object_id>/change/", "get", f"/{base}{obj}/change/", change),
            staff_only(base + "<path:object_id>/", "get", f"/{base}{obj}/", REDIRECT),
        ]
    return rows


NEW_USER = {"username": "m-new", "password1": "x-Fresh-Account-7", "password2": "x-Fresh-Account-7", "role": VIEWER}
NEW_PASSWORD = {"old_password": PASSWORD, "new_password1": "x-Changed-Pass-8", "new_password2": "x-Changed-Pass-8"}
# The admin screens (issue 17), last: revoking the bot-a token here would fail the bot API rows above.
ACCOUNT_ROWS = [
    row("audit/", "get", "/audit/", LOGIN, LOGIN, 200, 200, 200, 200),
    row("audit/", "get", "/audit/?batch=" + "0" * 32, LOGIN, LOGIN, 200, 200, 200, 200),
    row("tokens/", "get", "/tokens/", LOGIN, LOGIN, 403, 403, 403, 200),
    row("tokens/", "post", "/tokens/", LOGIN, LOGIN, 403, 403, 403, 200, data={"name": "new", "bot_uuids": "bot-a"}),
    row("tokens/<int:token_id>/revoke/", "post", "/tokens/{token}/revoke/", LOGIN, LOGIN, 403, 403, 403, REDIRECT),
    row("users/", "get", "/users/", LOGIN, LOGIN, 403, 403, 403, 200),
    row("users/", "post", "/users/", LOGIN, LOGIN, 403, 403, 403, REDIRECT, data=NEW_USER),
    row("users/<int:user_id>/", "get", "/users/{user}/", LOGIN, LOGIN, 403, 403, 403, 200),
    row(
        "users/<int:user_id>/role/",
        "post",
        "/users/{user}/role/",
        *(LOGIN, LOGIN, 403, 403, 403, REDIRECT),
        data={"role": VIEWER},
    ),
    row(
        "users/<int:user_id>/grants/",
        "post",
        "/users/{user}/grants/",
        *(LOGIN, LOGIN, 403, 403, 403, REDIRECT),
        data={"bot_uuids": ""},
    ),
    row(
        "users/<int:user_id>/active/",
        "post",
        "/users/{user}/active/",
        *(LOGIN, LOGIN, 403, 403, 403, REDIRECT),
        data={"active": "1"},
    ),
    row("users/<int:user_id>/unlock/", "post", "/users/{user}/unlock/", *(LOGIN, LOGIN, 403, 403, 403, REDIRECT)),
    # Each caller changes its own password (the form asks for the old one); last, as it ends the
    # sessions that `force_login` opens for the world's (now stale) user objects.
    row(
        "accounts/password_change/",
        "post",
        "/accounts/password_change/",
        *(LOGIN, LOGIN, REDIRECT, REDIRECT, REDIRECT, REDIRECT),
        data=NEW_PASSWORD,
    ),
]
# A console admin may read a superuser's account, never change it (the Django admin's rule too).
SUPERUSER_ROWS = [
    row(
        "users/<int:user_id>/role/",
        "post",
        "/users/{superuser}/role/",
        *(LOGIN, LOGIN, 403, 403, 403, 403),
        data={"role": VIEWER},
    ),
    row(
        "users/<int:user_id>/active/",
        "post",
        "/users/{superuser}/active/",
        *(LOGIN, LOGIN, 403, 403, 403, 403),
        data={"active": "0"},
    ),
    row("users/<int:user_id>/unlock/", "post", "/users/{superuser}/unlock/", *(LOGIN, LOGIN, 403, 403, 403, 403)),
]

ALL_ROWS = [*CONSOLE_ROWS, IMPORT_POST, *OTHER_ROWS, *API_ROWS, *admin_rows(), *SUPERUSER_ROWS, *ACCOUNT_ROWS]


def test_it_has_a_row_for_every_url_of_the_project():
    missing = sorted(every_route() - {r.route for r in ALL_ROWS})
    assert missing == [], f"URLs without a row in the permissions matrix: {missing}"
    stale = sorted({r.route for r in ALL_ROWS} - every_route())
    assert stale == [], f"rows for URLs that no longer exist: {stale}"


# --- the world ----------------------------------------------------------------------------------


def make_user(name: str, role: str | None, *, staff: bool = False, bots: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(name, password=PASSWORD, is_staff=staff)
    if role:
        user.groups.add(Group.objects.get(name=role))
    for bot in bots:
        BotGrant.objects.create(user=user, bot_uuid=bot)
    return user


@pytest.fixture
def world(db, system, settings):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 10**6
    keys = derive_scope("bot-a", "group_100", "session")
    episode = episodes.remember(keys, system, "Alice likes green tea", sender_id="u1").episode
    forget = episodes.remember(keys, system, "to be forgotten", sender_id="u1").episode
    profiles.update_profile(keys, system, "session", name="Tea club")
    snapshot = injection.record_injection(keys, system, "tea", sender_id="u1").snapshot
    episodes.remember(derive_scope("bot-b", "group_200", "session"), system, "bot b's own memory")
    users = {
        "viewer": make_user("m-viewer", VIEWER),
        "ungranted": make_user("m-ungranted", OPERATOR, bots=("bot-b",)),
        "operator": make_user("m-operator", OPERATOR),
        "admin": make_user("m-admin", ADMIN, staff=True),
    }
    superuser = User.objects.create_superuser("m-superuser", password=PASSWORD)
    own, own_secret = tokens.create_token("bot a", ["bot-a"], system)
    _, other_secret = tokens.create_token("bot b", ["bot-b"], system)
    seen = {"user_agent": "tests", "http_accept": "*/*", "path_info": "/accounts/login/"}
    values = {
        "attempt": AccessAttempt.objects.create(**seen, get_data="", post_data="", failures_since_start=1).pk,
        "accesslog": AccessLog.objects.create(**seen).pk,
        "failurelog": AccessFailureLog.objects.create(**seen).pk,
        "scope": Scope.objects.get(scope_key=keys.scope_key).pk,
        "episode": episode.episode_id,
        "forget": forget.episode_id,
        "snapshot": snapshot.snapshot_id,
        "group": Group.objects.get(name=VIEWER).pk,
        "user": users["viewer"].pk,
        "admin": users["admin"].pk,
        "superuser": superuser.pk,
        "admin_group": Group.objects.get(name=ADMIN).pk,
        "permission": Permission.objects.get(codename="view_auditentry").pk,
        "token": own.pk,
        "grant": BotGrant.objects.get().pk,
        "audit": AuditEntry.objects.order_by("id").first().pk,
        "job": jobs.create(jobs.IMPORT, scope="bot-a:*:session", bot_uuid="bot-a", actor=system, params={}).pk,
    }
    return {"users": users, "values": values, "secrets": {"own_token": own_secret, "other_token": other_secret}}


def fill(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, str):
        return template.format(**values)
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def outcome(response) -> Any:
    if response.status_code == 302:
        location = response["Location"]
        if location.startswith("/accounts/login/"):
            return LOGIN
        if location.startswith("/admin/login/"):
            return ADMIN_LOGIN
        return REDIRECT
    return response.status_code


def caller_client(caller: str, world: dict, **kwargs: Any) -> tuple[Client, dict[str, str]]:
    """(client, headers) for a caller of the matrix: a user's logged-in session or a token's header."""
    client = Client(**kwargs)
    headers = {}
    if caller in world["users"]:
        client.force_login(world["users"][caller])
    elif caller in world["secrets"]:
        headers["Authorization"] = f"Bearer {world['secrets'][caller]}"
    return client, headers


def call(client: Client, headers: dict, r: Row, values: dict, data: Any = None) -> Any:
    path = fill(r.path, values)
    body = fill(r.data, values) if data is None else data
    if r.api:
        if r.method == "get":
            return client.get(path, headers=headers)

        return client.post(path, data=json.dumps(body or {}), content_type="application/json", headers=headers)
    if r.method == "get":
        return client.get(path, headers=headers)
    return client.post(path, body or {}, headers=headers)


def import_upload_data() -> dict:
    upload = SimpleUploadedFile("x.json", b'{"version": 1, "episodes": [{"content": "imported"}]}')
    return {"file": upload, "format": "langbot", **SCOPE_BODY, "isolation": "session", "dry_run": "1"}


def test_it_answers_every_cell_of_the_matrix_as_expected(world):
    mismatches, cells = [], 0
    for r in ALL_ROWS:
        callers = API_CALLERS if r.api else CALLERS
        for caller, expected in zip(callers, r.expected, strict=True):
            client, headers = caller_client(caller, world)
            data = import_upload_data() if r is IMPORT_POST else None
            got = outcome(call(client, headers, r, world["values"], data))
            cells += 1
            if got != expected:
                mismatches.append(f"{r.method.upper()} {r.route} as {caller}: expected {expected}, got {got}")
    assert mismatches == [], "\n".join(mismatches)
    record_figure("permissions", "matrix_cells", cells)
    record_figure("permissions", "matrix_rows", len(ALL_ROWS))


# --- privilege escalation in the Django admin ---------------------------------------------------


def privileges(user: User) -> tuple:
    user.refresh_from_db()
    return (
        user.is_superuser,
        user.is_staff,
        sorted(user.groups.values_list("name", flat=True)),
        sorted(user.user_permissions.values_list("codename", flat=True)),
    )


def test_it_lets_no_console_admin_raise_anyones_privileges(client_for, world):
    """A staff user in the admin group saves its own account and a viewer's asking for superuser, staff,
    the admin role and a permission: the saves go through (302) and change none of those. A superuser's
    account is not its to change, re-password or delete. A superuser can still grant superuser, staff and
    permissions (audited); roles stay with the console."""
    users, values = world["users"], world["values"]
    admin_client, _ = caller_client("admin", world)
    before = {name: privileges(users[name]) for name in ("admin", "viewer")}
    for name, username, staff in (("admin", "m-admin", True), ("viewer", "m-viewer", False)):
        form = fill(user_form(username, staff=staff), values)
        response = admin_client.post(f"/admin/auth/user/{users[name].pk}/change/", form)
        assert response.status_code == 302, (name, response.content[:2000])
    assert {name: privileges(users[name]) for name in before} == before
    assert not users["admin"].is_superuser and users["viewer"].groups.get().name == VIEWER

    superuser = User.objects.get(pk=values["superuser"])
    password = superuser.password
    refused = {
        "change": admin_client.post(
            f"/admin/auth/user/{superuser.pk}/change/", fill(user_form("m-renamed", staff=False), values)
        ),
        "password": admin_client.post(
            f"/admin/auth/user/{superuser.pk}/password/", {"password1": "x-Takeover-9", "password2": "x-Takeover-9"}
        ),
        "delete": admin_client.post(f"/admin/auth/user/{superuser.pk}/delete/", {"post": "yes"}),
    }
    assert {what: response.status_code for what, response in refused.items()} == dict.fromkeys(refused, 403)
    admin_client.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": [superuser.pk], "post": "yes"}
    )
    superuser.refresh_from_db()
    assert (superuser.username, superuser.password, superuser.is_superuser) == ("m-superuser", password, True)

    root = client_for(superuser)
    form = fill(user_form("m-viewer", staff=True), values)
    assert root.post(f"/admin/auth/user/{users['viewer'].pk}/change/", form).status_code == 302
    # roles (groups) are the console's Users screen's, which audits them: read-only here for everyone
    assert privileges(users["viewer"]) == (True, True, [VIEWER], ["view_auditentry"])
    entry = AuditEntry.objects.filter(operation="user_admin_change", target_id=str(users["viewer"].pk)).last()
    assert entry.payload["after"]["is_superuser"] is True and entry.payload["before"]["is_superuser"] is False


# --- CSRF ---------------------------------------------------------------------------------------

POST_ROWS = [r for r in CONSOLE_ROWS + OTHER_ROWS + [IMPORT_POST] + ACCOUNT_ROWS if r.method == "post"]


def test_it_enforces_csrf_on_every_console_mutation(client_for, world):
    """An admin's session without the CSRF token is refused (403) on every POST; the same request with
    the token gets past the check, so the 403 is the CSRF check and not the permission."""
    refused = []
    for r in POST_ROWS:
        client, headers = caller_client("admin", world, enforce_csrf_checks=True)
        before = AuditEntry.objects.count()
        data = import_upload_data() if r is IMPORT_POST else None
        response = call(client, headers, r, world["values"], data)
        if response.status_code != 403 or AuditEntry.objects.count() != before:
            refused.append(f"POST {r.path}: {response.status_code}")
        client.get("/")  # sets the CSRF cookie
        token = client.cookies["csrftoken"].value
        data = {**(fill(r.data, world["values"]) or {}), **(import_upload_data() if r is IMPORT_POST else {})}
        data["csrfmiddlewaretoken"] = token
        with_token = call(client, headers, r, world["values"], data)
        if with_token.status_code == 403:
            refused.append(f"POST {r.path} with the token: still 403")
    admin_post = client_for(world["users"]["admin"], enforce_csrf_checks=True)
    assert admin_post.post("/admin/logout/").status_code == 403
    assert refused == [], refused
    record_figure("permissions", "csrf_checked_posts", len(POST_ROWS) + 1)


def test_it_exempts_only_the_token_authenticated_api_from_csrf(world):
    client, headers = caller_client("own_token", world, enforce_csrf_checks=True)
    response = client.post(
        "/api/v1/remember",
        data='{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x"}',
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 201
    # A logged-in browser session is no API credential, so a forged cross-site POST gets nothing.
    forged, _ = caller_client("admin", world, enforce_csrf_checks=True)
    response = forged.post(
        "/api/v1/remember",
        data='{"bot_uuid": "bot-a", "session_name": "g_1", "content": "x"}',
        content_type="application/json",
    )
    assert response.status_code == 401


def test_it_lets_no_bot_token_reach_another_bots_scope(world):
    """A token for bot-b, on every API endpoint, in both isolations: 403 and nothing written."""
    client, headers = caller_client("other_token", world)
    before = AuditEntry.objects.count()
    for r in API_ROWS[:6]:
        for isolation in ("session", "bot"):
            body = {**fill(r.data, world["values"]), "isolation": isolation} if r.data else None
            path = fill(r.path, world["values"]) + (f"&isolation={isolation}" if r.method == "get" else "")
            response = (
                client.get(path, headers=headers)
                if r.method == "get"
                else client.post(path, data=json.dumps(body), content_type="application/json", headers=headers)
            )
            assert response.status_code == 403, (r.path, isolation, response.content[:200])
    assert AuditEntry.objects.count() == before
    assert BotToken.objects.count() == 2
