"""The admin screens in Chromium (issue 17): a bot token created, its secret copied with the copy
button (no inline script: the CSP allows none) and revoked; a user created, given a role and
deactivated; the global audit log filtered with its readable diff and chain state; and an htmx
failure that shows the server's own explanation and marks the stale list."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User

from memconsole.memory import errors, queries, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import BotToken
from memconsole.memory.roles import ADMIN, OPERATOR, VIEWER

from .conftest import Console, Seeded, accept_dialogs, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()


def csp_violations(console: Console) -> list[str]:
    seen: list[str] = []
    console.page.on(
        "console", lambda message: seen.append(message.text) if "Content Security Policy" in message.text else None
    )
    return seen


@pytest.mark.browser
def test_it_creates_copies_and_revokes_a_bot_token(console: Console, admin_user) -> None:
    page = console.page
    console.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.base_url)
    violations = csp_violations(console)
    confirms = accept_dialogs(console)
    console.log_in("admin")
    page.get_by_role("link", name="Your account: admin").click()
    page.get_by_role("link", name="Bot tokens").click()
    page.get_by_label("Token name").fill("support bot")
    page.get_by_label("Bots it may use").fill("bot-a")
    page.get_by_role("button", name="Create token").click()
    secret_box = page.locator("#token-secret")
    expect(secret_box).to_have_text(re.compile(r"^mct_[0-9a-f]{8}_"))
    secret = secret_box.inner_text()
    assert tokens.authenticate(secret) is not None
    page.get_by_role("button", name="Copy the token").click()
    expect(page.locator("#token-copy-status")).to_have_text("Copied to the clipboard")
    assert page.evaluate("() => navigator.clipboard.readText()") == secret

    page.get_by_role("button", name="Revoke support bot").click()
    expect(page.get_by_text("Revoked just now.")).to_be_visible()
    assert confirms and "Revoke the token “support bot”?" in confirms[0]
    assert BotToken.objects.get().revoked_at is not None
    page.reload()
    assert secret not in page.content()  # shown once
    assert violations == []
    console.screenshot("tokens")


@pytest.mark.browser
def test_it_creates_a_user_sets_the_role_and_deactivates(console: Console, admin_user) -> None:
    page = console.page
    accept_dialogs(console)
    console.log_in("admin")
    page.get_by_role("link", name="Your account: admin").click()
    page.get_by_role("link", name="Users").click()
    page.get_by_label("Username").fill("carol")
    page.get_by_label("Password", exact=True).fill("x-Fresh-Account-7")
    page.get_by_label("Password again").fill("x-Fresh-Account-7")
    page.get_by_label("Limit to these bots").fill("bot-a")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("heading", name="carol", exact=True)).to_be_visible()
    expect(page.get_by_text("The user carol is created.")).to_be_visible()

    page.get_by_role("combobox", name="Role").select_option(OPERATOR)
    page.get_by_role("button", name="Set role").click()
    expect(page.get_by_text("The role of carol is changed.")).to_be_visible()
    carol = User.objects.get(username="carol")
    assert list(carol.groups.values_list("name", flat=True)) == [OPERATOR]

    page.get_by_role("button", name="Deactivate account").click()
    expect(page.get_by_role("button", name="Reactivate account")).to_be_visible()
    carol.refresh_from_db()
    assert not carol.is_active and not carol.is_staff and not carol.is_superuser
    console.screenshot("user_detail")


@pytest.mark.browser
def test_it_filters_the_global_audit_log_and_shows_a_readable_diff(console: Console, seeded: Seeded, viewer) -> None:
    page = console.page
    console.log_in("viewer")
    page.get_by_role("link", name="Audit log").click()
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    expect(page.locator(".chain-state")).to_contain_text("The audit chain checks out for the 25 entries")
    page.get_by_label("Operation").fill("PROFILE_UPDATE")  # any case
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"operation=PROFILE_UPDATE"))
    cells = page.locator("table.audit tbody tr td:nth-child(3) > code")  # the operation's code, beside its name
    expect(cells).to_have_text(["profile_update", "profile_update"])
    row = page.locator("table.audit tbody tr").first
    row.get_by_text("Before and after", exact=True).click()
    diff = row.locator("dl.audit-diff")
    expect(diff).to_be_visible()
    expect(diff.locator(".diff-row").first).to_contain_text("Name")  # the field a person reads first, by its label
    expect(diff.locator(".diff-row").first).to_contain_text("added")  # the change said in words
    assert row.locator("details.raw-json pre").first.is_hidden()  # the JSON only on request
    console.screenshot("audit_all")


@pytest.mark.browser
def test_it_shows_the_servers_own_message_when_htmx_fails(
    console: Console, seeded: Seeded, admin_user, monkeypatch
) -> None:
    page = console.page
    accept_dialogs(console)
    tokens.create_token("support bot", ["bot-a"], Actor.system("tests"))
    console.log_in("admin")
    console.goto("/tokens/")
    admin_user.groups.set([Group.objects.get(name=VIEWER)])  # demoted while the page is open
    page.get_by_role("button", name="Revoke support bot").click()
    banner = page.locator("#error-region")
    expect(banner).to_have_text("Your role does not allow this. Ask an administrator if you need it.")
    admin_user.groups.set([Group.objects.get(name=ADMIN)])

    console.goto("/audit/")
    expect(page.locator("table.audit")).to_be_visible()

    def failing(*args: object, **kwargs: object) -> None:
        raise errors.Unavailable("the index is down", code="vector_index")

    monkeypatch.setattr(queries, "audit_page", failing)
    page.get_by_label("Operation").fill("remember")
    page.get_by_role("button", name="Apply filters").click()
    expect(banner).to_contain_text("The search index cannot be reached")
    expect(banner).to_contain_text("The list below is out of date")
    expect(page.locator("#audit-list")).to_have_attribute("data-stale", "")
