"""HTML and script in every field the console shows are displayed as text, never executed.

Every user-controlled field (bot UUID, session name, episode content, tags, speaker id and name,
profile name/traits/preferences/notes, injection query and query id, bot token name, imported ids,
import error messages, filter inputs echoed back, `next` URLs) carries a payload that breaks out of
an attribute and opens a <script> tag. Every console page that answers GET (enumerated from the URL
resolver, as full pages and as htmx fragments), the import report and the admin's memory pages
are rendered with Django's test client: the raw payload must never appear, and each field's
marker must appear (escaped) somewhere, which proves the field really was shown.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from memconsole.memory import episodes, injection, jobs, profiles, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import Scope
from memconsole.memory.scopes import derive_scope
from tests.jobs.work import follow_job

from .conftest import record_figure

pytestmark = pytest.mark.django_db


def payload(field: str) -> str:
    """Closes an attribute, opens a tag, runs script; no spaces or ':' (so a bot UUID may hold it)."""
    return f'"><script>alert("xss-{field}")</script>'


RAW = re.compile(r'<script>alert\("xss-|onerror=alert\(|href="javascript:', re.IGNORECASE)
SHOWN_FIELDS = [
    "bot",
    "session",
    "content",
    "tag",
    "sender",
    "sendername",
    "pname",
    "trait",
    "pref",
    "notes",
    "spname",
    "query",
    "qid",
    "token",
]


def console_get_routes() -> list[tuple[str, list[str]]]:
    """(url name, converter names) of every console URL, from the resolver."""
    found = []

    def walk(resolver: URLResolver, namespace: str | None) -> None:
        for pattern in resolver.url_patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern, pattern.namespace or namespace)
            elif isinstance(pattern, URLPattern) and namespace == "console" and pattern.name:
                found.append((f"console:{pattern.name}", list(pattern.pattern.converters)))

    walk(get_resolver(), None)
    return found


@pytest.fixture
def hostile_world(db, system):
    bot = payload("bot")
    keys = derive_scope(bot, payload("session"), "session")
    token, _ = tokens.create_token(payload("token"), [bot], system)
    by_token = Actor.for_token(token)
    sender = payload("sender")
    first = episodes.remember(
        keys, by_token, payload("content"), tags=[payload("tag")], sender_id=sender, sender_name=payload("sendername")
    ).episode
    second = episodes.remember(
        keys, by_token, "a correction of " + payload("content"), tags=["correction"], sender_id=sender
    )
    episodes.archive(keys, system, [second.episode.episode_id])
    profiles.update_profile(
        keys,
        system,
        "session",
        name=payload("pname"),
        add_traits=[payload("trait")],
        add_preferences=[payload("pref")],
        notes=payload("notes"),
    )
    profiles.update_profile(keys, system, "session", notes=payload("notes") + " v2")
    profiles.update_profile(keys, system, "speaker", sender, name=payload("spname"), add_traits=[payload("trait")])
    snapshot = injection.record_injection(
        keys, by_token, payload("query"), query_id=payload("qid"), sender_id=sender, sender_name=payload("sendername")
    ).snapshot
    scope = Scope.objects.get(scope_key=keys.scope_key)
    person = User.objects.create(username=payload("user")[:150], first_name=payload("first"), email="x@example.org")
    return {
        "scope": scope,
        "episode": first,
        "snapshot": snapshot,
        "sender": sender,
        "keys": keys,
        "token": token,
        "user": person,
        "job": jobs.create(
            jobs.IMPORT,
            scope=payload("jobscope"),
            bot_uuid=keys.bot_uuid,
            actor=Actor("user", payload("jobactor")),
            params={"file_name": payload("jobfile")},
        ),
    }


def addresses(world) -> list[str]:
    scope, sender = world["scope"], world["sender"]
    values = {
        "scope_id": scope.pk,
        "episode_id": world["episode"].episode_id,
        "snapshot_id": world["snapshot"].snapshot_id,
        "token_id": world["token"].pk,
        "user_id": world["user"].pk,
        "job_id": world["job"].pk,
    }
    urls = []
    for name, converters in console_get_routes():
        if "profile_type" in converters:
            for profile_type, query in (("session", ""), ("speaker", f"?sender={sender}")):
                urls.append(
                    reverse(
                        name,
                        kwargs={
                            **{c: values[c] for c in converters if c != "profile_type"},
                            "profile_type": profile_type,
                        },
                    )
                    + query
                )
        else:
            urls.append(reverse(name, kwargs={c: values[c] for c in converters}))
    p = payload("echo")
    urls += [
        reverse("console:overview") + f"?q={p}",
        reverse("console:episodes", args=[scope.pk]) + f"?q={p}&tag={p}&sender={p}",
        reverse("console:episodes", args=[scope.pk]) + "?status=all",
        reverse("console:episodes", args=[scope.pk]) + f"?cursor={p}",
        reverse("console:audit", args=[scope.pk]) + f"?actor={p}&operation={p}",
        reverse("console:profile_detail", args=[scope.pk, "speaker"]) + f"?sender={sender}&diff_from=1&diff_to=2",
        reverse("console:import") + f"?scope={scope.pk}",
        reverse("console:bot_insights") + "?" + urlencode({"bot": world["keys"].bot_uuid}),
        reverse("console:known_at", args=[scope.pk]) + f"?speaker={sender}&at=",
    ]
    return urls


def test_it_shows_every_field_escaped_on_every_console_page(client_for, hostile_world, admin_user):
    admin_user.is_superuser = admin_user.is_staff = True  # the admin site's pages too
    admin_user.save()
    client = client_for(admin_user)
    pages = []
    for address in addresses(hostile_world):
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = client.get(address, **headers)
            if response.status_code == 405:  # a POST-only URL
                continue
            assert response.status_code in (200, 302, 400), (address, response.status_code)
            pages.append((address, response.content.decode()))
    for name in ("memory_scope", "memory_auditentry", "memory_bottoken"):
        response = client.get(reverse(f"admin:{name}_changelist"))
        assert response.status_code == 200, name
        pages.append((name, response.content.decode()))

    for address, html in pages:
        match = RAW.search(html)
        assert match is None, f"{address}: unescaped payload {html[max(0, match.start() - 80) : match.end() + 80]!r}"
    shown = {field for field in SHOWN_FIELDS if any(f"xss-{field}" in html for _, html in pages)}
    assert shown == set(SHOWN_FIELDS), f"never shown: {set(SHOWN_FIELDS) - shown}"
    record_figure("hostile_input", "console_pages_rendered", len(pages))


def test_it_escapes_import_reports_and_their_errors(hostile_world, admin_client_):
    keys = hostile_world["keys"]
    target = {"bot_uuid": keys.bot_uuid, "session_name": keys.session_name, "isolation": "session"}
    records = [{"id": payload("oldid"), "content": payload("imported"), "sender_id": payload("isender")}]
    body = json.dumps({"version": 1, "episodes": records}).encode()
    pages = []
    for _attempt in range(2):  # the second import reports the same ids as conflicts
        upload = SimpleUploadedFile(payload("filename") + ".json", body, content_type="application/json")
        started = admin_client_.post("/import/", {"file": upload, "format": "langbot", **target, "dry_run": ""})
        response = follow_job(admin_client_, started)  # an import runs as a job (issue 21); its page reports
        assert response.status_code == 200, response.content[:300]
        pages.append(response.content.decode())
    bad = json.dumps({"version": 1, "episodes": [{"content": "x", "timestamp": payload("badtime")}]}).encode()
    upload = SimpleUploadedFile("bad.json", bad, content_type="application/json")
    started = admin_client_.post("/import/", {"file": upload, "format": "langbot", **target, "dry_run": "1"})
    response = follow_job(admin_client_, started)  # the job fails and its page says why
    pages.append(response.content.decode())

    for html in pages:
        assert RAW.search(html) is None
    assert "xss-oldid" in pages[1] and "xss-badtime" in pages[2]  # the conflict and the error were shown
    record_figure("hostile_input", "console_pages_rendered", len(pages))


def test_it_never_links_to_a_javascript_next_url(hostile_world, admin_client_):
    scope, episode = hostile_world["scope"], hostile_world["episode"]
    for next_url in ("javascript:alert(1)", "JavaScript:alert(1)", "//evil.example/", "https://evil.example/x"):
        response = admin_client_.post(
            reverse("console:episodes_bulk", args=[scope.pk]),
            {"action": "archive", "episode_ids": [episode.episode_id], "next": next_url},
        )
        assert response.status_code == 200
        html = response.content.decode()
        assert "evil.example" not in html and RAW.search(html) is None, next_url
        response = admin_client_.post(
            reverse("console:episode_delete", args=[scope.pk, episode.episode_id]), {"next": next_url}
        )
        assert response.status_code == 200 and "evil.example" not in response.content.decode()
        assert RAW.search(response.content.decode()) is None
    record_figure("hostile_input", "console_pages_rendered", 8)


def test_it_refuses_a_username_with_markup(db):
    """Usernames are the one field shown everywhere that users pick; Django allows none of this."""

    user = User(username=payload("user"))
    with pytest.raises(DjangoValidationError):
        user.full_clean()
