"""The Users screen and one's own password: creating users, setting their role and bot grants,
deactivating them, all audited; never superuser or staff, a superuser's account changed only by a
superuser, and an admin limited to some bots kept to users of those bots."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group, User
from django.test import Client

from memconsole.memory import accounts, episodes, tokens
from memconsole.memory.errors import PermissionDenied
from memconsole.memory.models import AuditEntry, BotGrant
from memconsole.memory.roles import ADMIN, OPERATOR, VIEWER
from tests.conftest import PASSWORD

from .conftest import htmx

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "x-Fresh-Account-7"


def new_user(username: str = "carol", **extra: str) -> dict[str, str]:
    return {"username": username, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "role": VIEWER, **extra}


def logs_in(username: str, password: str) -> bool:
    response = Client().post("/accounts/login/", {"username": username, "password": password})
    return response.status_code == 302


def role_names(user: User) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


@pytest.fixture
def superuser(db):
    return User.objects.create_superuser("root", password=PASSWORD)


@pytest.fixture
def limited_admin(db):
    user = User.objects.create_user("limited-admin", password=PASSWORD)
    user.groups.add(Group.objects.get(name=ADMIN))
    BotGrant.objects.create(user=user, bot_uuid="bot-b")
    return user


def test_it_lists_the_users_with_role_bots_and_state(admin_client_, url, viewer, granted_viewer):
    page = admin_client_.get(url("users")).content.decode()
    assert "granted" in page and "<code>bot-b</code>" in page and "every bot" in page
    assert "Viewer" in page and "Admin" in page and "Create a user" in page


def test_it_creates_a_user_with_a_role_and_bots_never_staff(admin_client_, url):
    data = new_user(bot_uuids="bot-a\nbot-b", is_superuser="on", is_staff="on")
    response = admin_client_.post(url("users"), data)
    user = User.objects.get(username="carol")
    assert response.status_code == 302 and response["Location"] == url("user_detail", user.pk)
    assert (user.is_superuser, user.is_staff, user.is_active) == (False, False, True)
    assert role_names(user) == [VIEWER] and accounts.grants_of(user) == ["bot-a", "bot-b"]
    assert logs_in("carol", NEW_PASSWORD)
    entry = AuditEntry.objects.get(operation="user_create")
    assert entry.actor == "user:admin" and entry.target_type == "user" and entry.target_id == str(user.pk)
    assert NEW_PASSWORD not in str(entry.payload)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (new_user(password2="something-else-9"), "The two passwords differ."),
        (new_user(password1="123", password2="123"), "This password is too short"),
        (new_user(username="viewer"), "A user with this username already exists."),
        (new_user(username="no spaces"), "Enter a valid username"),
        (new_user(role="superuser"), "Select a valid choice"),
    ],
)
def test_it_refuses_a_bad_new_user_with_the_reason(admin_client_, url, viewer, data, error):
    response = admin_client_.post(url("users"), data)
    assert response.status_code == 400 and error in response.content.decode()
    assert not AuditEntry.objects.filter(operation="user_create").exists()


def test_it_refuses_a_username_that_differs_from_another_only_in_letter_case(admin_client_, url, viewer):
    # "ADMIN" was created beside "admin": user:ADMIN and user:admin in the audit log
    form = {"username": viewer.username.upper(), "password1": "x-Fresh-Account-7", "password2": "x-Fresh-Account-7"}
    response = admin_client_.post(url("users"), {**form, "role": VIEWER})
    assert response.status_code == 400 and "A user with this username already exists." in response.content.decode()
    assert User.objects.filter(username__iexact=viewer.username).count() == 1


def test_it_refuses_a_short_password_in_chinese(admin_client_, url):
    data = new_user(password1="123", password2="123")
    response = admin_client_.post(url("users"), data, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400 and "密码太短。密码必须包含至少 8 个字符。" in response.content.decode()


def test_it_answers_htmx_with_the_users_fragment(admin_client_, url):
    response = admin_client_.post(url("users"), new_user(password2="differs-9"), **htmx("users"))
    html = response.content.decode()
    assert response.status_code == 400 and html.lstrip().startswith('<div id="users"') and "<html" not in html


def test_it_sets_a_role_and_audits_before_and_after(admin_client_, url, viewer):
    response = admin_client_.post(url("user_role", viewer.pk), {"role": OPERATOR})
    assert response.status_code == 302 and role_names(viewer) == [OPERATOR]
    entry = AuditEntry.objects.get(operation="user_role")
    assert (entry.payload["before"], entry.payload["after"]) == ({"role": VIEWER}, {"role": OPERATOR})
    admin_client_.post(url("user_role", viewer.pk), {"role": OPERATOR})  # unchanged: not audited again
    assert AuditEntry.objects.filter(operation="user_role").count() == 1


def test_it_answers_an_htmx_change_with_the_user_fragment(admin_client_, url, viewer):
    response = admin_client_.post(url("user_role", viewer.pk), {"role": ADMIN}, **htmx("user-detail"))
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="user-detail"') and "<html" not in html
    assert "The role of viewer is changed." in html


def test_it_refuses_an_unknown_role(admin_client_, url, viewer):
    response = admin_client_.post(url("user_role", viewer.pk), {"role": "root"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert role_names(viewer) == [VIEWER]


def test_it_grants_bots_and_lifts_the_limit(admin_client_, url, viewer):
    admin_client_.post(url("user_grants", viewer.pk), {"bot_uuids": "bot-a, bot-b"})
    assert accounts.grants_of(viewer) == ["bot-a", "bot-b"]
    admin_client_.post(url("user_grants", viewer.pk), {"bot_uuids": ""})
    assert accounts.grants_of(viewer) == []
    entries = AuditEntry.objects.filter(operation="user_grants").order_by("id")
    assert [e.payload["after"]["bot_uuids"] for e in entries] == [["bot-a", "bot-b"], []]
    response = admin_client_.post(url("user_grants", viewer.pk), {"bot_uuids": "bad bot"})
    assert response.status_code == 400 and "Each bot is a bot UUID" in response.content.decode()


def test_it_warns_of_a_granted_bot_nothing_here_knows(admin_client_, url, viewer, scope, system):
    # a typo in a grant ("bot-aa") left the user seeing nothing, and the console said all was well
    warning = "No space and no token here names bot"
    page = admin_client_.post(url("user_grants", viewer.pk), {"bot_uuids": "bot-a\nbot-aa"}, follow=True)
    assert f"{warning} bot-aa yet" in page.content.decode()
    assert accounts.grants_of(viewer) == ["bot-a", "bot-aa"]  # granted all the same: it may be a bot still to come
    tokens.create_token("next bot", ["bot-z"], system)
    page = admin_client_.post(url("user_grants", viewer.pk), {"bot_uuids": "bot-a, bot-z"}, **htmx())
    assert "The bots of" in page.content.decode() and warning not in page.content.decode()
    page = admin_client_.post(
        url("users"),
        {"username": "dora", "password1": "x-Fresh-Account-7", "password2": "x-Fresh-Account-7", "role": VIEWER}
        | {"bot_uuids": "bot-q"},
        follow=True,
    )
    assert f"{warning} bot-q yet" in page.content.decode()


def test_it_deactivates_and_reactivates_an_account(admin_client_, url, viewer, client_for):
    session = client_for(viewer)
    assert admin_client_.post(url("user_active", viewer.pk), {"active": "0"}).status_code == 302
    viewer.refresh_from_db()
    assert not viewer.is_active
    assert session.get(url("overview"))["Location"].startswith("/accounts/login/")  # its session has ended
    assert not logs_in("viewer", PASSWORD)
    admin_client_.post(url("user_active", viewer.pk), {"active": "1"})
    viewer.refresh_from_db()
    assert viewer.is_active
    assert session.get(url("overview"))["Location"].startswith("/accounts/login/")  # not revived: log in again
    assert [e.payload["after"] for e in AuditEntry.objects.filter(operation="user_active").order_by("id")] == [
        {"is_active": False},
        {"is_active": True},
    ]
    assert admin_client_.post(url("user_active", viewer.pk), {"active": "maybe"}).status_code == 400


def test_it_refuses_to_deactivate_ones_own_account(admin_client_, url, admin_user):
    page = admin_client_.get(url("user_detail", admin_user.pk)).content.decode()
    assert "You cannot deactivate your own account." in page
    response = admin_client_.post(url("user_active", admin_user.pk), {"active": "0"})
    assert response.status_code == 400 and "you cannot deactivate your own account" in response.content.decode()
    assert "You cannot deactivate your own account." not in response.content.decode()  # said once, not twice
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_it_refuses_to_change_ones_own_role_or_bots(admin_client_, url, admin_user):
    role_before, bots_before = accounts.role_of(admin_user), accounts.grants_of(admin_user)
    response = admin_client_.post(url("user_role", admin_user.pk), {"role": VIEWER})
    assert response.status_code == 400 and "you cannot change your own role" in response.content.decode()
    response = admin_client_.post(url("user_grants", admin_user.pk), {"bot_uuids": "bot-a"})
    assert response.status_code == 400 and "bots of your own account" in response.content.decode()
    assert (accounts.role_of(admin_user), accounts.grants_of(admin_user)) == (role_before, bots_before)
    assert admin_client_.get("/users/").status_code == 200
    chinese = admin_client_.post(url("user_role", admin_user.pk), {"role": VIEWER}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "您不能更改自己的角色" in chinese.content.decode()


def test_it_lets_no_console_admin_change_a_superuser(admin_client_, url, superuser):
    page = admin_client_.get(url("user_detail", superuser.pk)).content.decode()
    assert "only a superuser may change it" in page and "Set role" not in page
    for name, data in (("user_role", {"role": VIEWER}), ("user_grants", {"bot_uuids": "bot-a"})):
        assert admin_client_.post(url(name, superuser.pk), data).status_code == 403
    assert admin_client_.post(url("user_active", superuser.pk), {"active": "0"}).status_code == 403
    superuser.refresh_from_db()
    assert superuser.is_active and superuser.is_superuser and not superuser.bot_grants.exists()
    assert not AuditEntry.objects.filter(target_type="user").exists()


def test_it_lets_a_superuser_change_accounts_but_not_make_superusers(client_for, url, superuser, viewer):
    root = client_for(superuser)
    assert root.post(url("user_role", viewer.pk), {"role": ADMIN, "is_superuser": "on"}).status_code == 302
    viewer.refresh_from_db()
    assert role_names(viewer) == [ADMIN] and not viewer.is_superuser and not viewer.is_staff


def test_it_keeps_an_admin_limited_to_some_bots_to_users_of_those_bots(client_for, url, limited_admin, viewer):
    client = client_for(limited_admin)
    bot_b_user = accounts.create_user(limited_admin, "bob-b", NEW_PASSWORD, VIEWER, ["bot-b"])
    page = client.get(url("users")).content.decode()
    assert "bob-b" in page and ">viewer<" not in page  # the viewer sees every bot: not this admin's to manage
    assert "One bot UUID per line, among your bots: bot-b." in page  # not "leave empty", which they may not
    assert "Leave empty to let the user see every bot" not in page
    assert client.get(url("user_detail", viewer.pk)).status_code == 404
    assert client.post(url("user_role", viewer.pk), {"role": ADMIN}).status_code == 404
    response = client.post(url("users"), new_user("dave"))
    assert response.status_code == 400 and "Name at least one of your bots: bot-b." in response.content.decode()
    response = client.post(url("user_grants", bot_b_user.pk), {"bot_uuids": "bot-a"})
    assert response.status_code == 400 and "You have no access to bot bot-a" in response.content.decode()
    assert client.post(url("users"), new_user("dave", bot_uuids="bot-b")).status_code == 302
    with pytest.raises(PermissionDenied):  # the domain keeps the rule too
        accounts.set_grants(limited_admin, bot_b_user, [])


@pytest.mark.parametrize("client_name", ["viewer_client", "operator_client"])
def test_it_refuses_the_users_screen_to_roles_below_admin(request, url, client_name, viewer):
    client = request.getfixturevalue(client_name)
    assert client.get(url("users")).status_code == 403
    assert client.get(url("user_detail", viewer.pk)).status_code == 403
    assert client.post(url("users"), new_user()).status_code == 403
    assert client.post(url("user_role", viewer.pk), {"role": ADMIN}).status_code == 403
    assert role_names(viewer) == [VIEWER] and not User.objects.filter(username="carol").exists()


def test_it_sends_anonymous_callers_to_the_login_and_404s_unknown_users(client, admin_client_, url):
    assert client.get(url("users"))["Location"].startswith("/accounts/login/")
    assert client.post(url("user_role", 1), {"role": ADMIN})["Location"].startswith("/accounts/login/")
    assert admin_client_.get(url("user_detail", 999_999)).status_code == 404
    assert admin_client_.get(url("user_role", 1)).status_code == 405


def test_it_enforces_csrf_on_user_changes(client_for, admin_user, url, viewer):
    client = client_for(admin_user, enforce_csrf_checks=True)
    assert client.post(url("users"), new_user()).status_code == 403
    assert client.post(url("user_role", viewer.pk), {"role": ADMIN}).status_code == 403
    assert role_names(viewer) == [VIEWER] and not AuditEntry.objects.exists()


# --- one's own password -------------------------------------------------------------------------


def test_it_changes_ones_password_in_the_consoles_look_and_audits_it(viewer_client, viewer):
    page = viewer_client.get("/accounts/password_change/").content.decode()
    assert 'class="brand"' in page and "Change your password" in page and "Django administration" not in page
    form = {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    response = viewer_client.post("/accounts/password_change/", form)
    assert response.status_code == 302 and response["Location"] == "/accounts/password_change/done/"
    viewer.refresh_from_db()
    assert viewer.check_password(NEW_PASSWORD)
    assert viewer_client.get("/").status_code == 200  # this session stays logged in
    assert "Your password is changed." in viewer_client.get(response["Location"]).content.decode()
    entry = AuditEntry.objects.get(operation="password_change")
    assert entry.actor == "user:viewer" and NEW_PASSWORD not in str(entry.payload)


def test_it_refuses_a_wrong_old_password_with_400(viewer_client, viewer):
    form = {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    response = viewer_client.post("/accounts/password_change/", form)
    assert response.status_code == 400 and "Your old password was entered incorrectly" in response.content.decode()
    assert not AuditEntry.objects.filter(operation="password_change").exists()


# --- navigation ---------------------------------------------------------------------------------


def test_it_links_the_admin_screens_by_role_and_django_admin_for_superusers_only(
    client_for, viewer_client, admin_client_, superuser
):
    viewer_page = viewer_client.get("/").content.decode()
    assert 'href="/audit/"' in viewer_page and 'class="whoami" href="/accounts/password_change/"' in viewer_page
    account = viewer_client.get("/accounts/password_change/").content.decode()
    assert 'href="/users/"' not in account and 'href="/tokens/"' not in account and 'href="/admin/"' not in account
    account = admin_client_.get("/accounts/password_change/").content.decode()
    assert 'href="/users/"' in account and 'href="/tokens/"' in account and 'href="/admin/"' not in account
    assert 'href="/admin/"' not in admin_client_.get("/").content.decode()
    assert 'href="/admin/"' in client_for(superuser).get("/accounts/password_change/").content.decode()


def test_a_superuser_is_shown_as_one_not_as_having_no_role(client_for, url, db):
    """Found by a new admin: the first admin (a superuser, as first_start makes it) read "no role",
    and their role menu offered Viewer."""
    root = User.objects.create_superuser("root", password="x" * 12)
    client = client_for(root)
    listing = client.get(url("users")).content.decode()
    assert "Superuser (every right)" in listing and "no role" not in listing
    detail = client.get(url("user_detail", root.pk)).content.decode()
    assert "A superuser has every right, whatever their role." in detail


def test_a_locked_out_account_says_so_and_an_admin_can_unlock_it(admin_client_, url, viewer, settings):
    """Found by a new admin: an account locked after 5 failed logins was listed as Active, with no
    way to let its owner back in but waiting."""
    for _ in range(settings.AXES_FAILURE_LIMIT):
        Client().post("/accounts/login/", {"username": "viewer", "password": "wrong"})
    assert "Locked out" in admin_client_.get(url("users")).content.decode()
    detail = admin_client_.get(url("user_detail", viewer.pk)).content.decode()
    assert "after too many failed logins, until" in detail and "Unlock now" in detail

    response = admin_client_.post(url("user_unlock", viewer.pk))

    assert response.status_code == 302
    assert "Locked out" not in admin_client_.get(url("users")).content.decode()
    entry = AuditEntry.objects.get(operation="user_unlock")
    assert entry.target_id == str(viewer.pk) and entry.target_type == "user"
    logged_in = Client().post("/accounts/login/", {"username": "viewer", "password": PASSWORD})
    assert logged_in.status_code == 302


def test_unlocking_needs_the_users_right(operator_client, url, viewer):
    assert operator_client.post(url("user_unlock", viewer.pk)).status_code == 403


def test_account_changes_in_the_django_admin_are_audited_and_roles_and_grants_are_left_to_the_console(
    client_for, superuser, viewer
):
    # a role or grant changed in the Django admin took effect with no audit entry
    admin_site = client_for(superuser)
    form = {"username": "viewer-renamed", "date_joined_0": "2025-01-01", "date_joined_1": "00:00:00"}
    form["groups"] = [str(Group.objects.get(name=ADMIN).pk)]  # read-only there: ignored
    response = admin_site.post(f"/admin/auth/user/{viewer.pk}/change/", form)
    assert response.status_code == 302, response.content[:300]
    viewer.refresh_from_db()
    assert (viewer.username, viewer.is_active, accounts.role_of(viewer)) == ("viewer-renamed", False, VIEWER)
    entry = AuditEntry.objects.get(operation="user_admin_change", target_id=str(viewer.pk))
    assert entry.actor == "user:root"
    assert entry.payload["before"]["is_active"] is True and entry.payload["after"]["is_active"] is False
    assert entry.payload["after"]["username"] == "viewer-renamed"

    new_password = {"password1": "x-Admin-Set-9", "password2": "x-Admin-Set-9"}
    assert admin_site.post(f"/admin/auth/user/{viewer.pk}/password/", new_password).status_code == 302
    assert AuditEntry.objects.filter(operation="password_change", target_id=str(viewer.pk)).exists()
    assert admin_site.get("/admin/memory/botgrant/add/").status_code == 403
    assert admin_site.post(f"/admin/auth/user/{viewer.pk}/delete/", {"post": "yes"}).status_code == 302
    assert AuditEntry.objects.get(operation="user_delete").payload["before"]["username"] == "viewer-renamed"


@pytest.mark.django_db(transaction=True)
def test_a_password_set_in_the_django_admin_is_saved_with_its_audit_entry(client_for, superuser, viewer):
    # outside a test's transaction the admin's password view answered 500 and left the change unaudited
    response = client_for(superuser).post(
        f"/admin/auth/user/{viewer.pk}/password/", {"password1": "x-Admin-Set-9", "password2": "x-Admin-Set-9"}
    )
    assert response.status_code == 302
    viewer.refresh_from_db()
    assert viewer.check_password("x-Admin-Set-9")
    assert AuditEntry.objects.filter(operation="password_change", target_id=str(viewer.pk)).count() == 1


def test_roles_are_read_only_in_the_django_admin(client_for, superuser):
    # a permission added to the viewer role there gave every viewer the tokens screen, unaudited
    viewers = Group.objects.get(name=VIEWER)
    before = set(viewers.permissions.values_list("codename", flat=True))
    response = client_for(superuser).post(
        f"/admin/auth/group/{viewers.pk}/change/", {"name": VIEWER, "permissions": []}
    )
    assert response.status_code == 403
    assert set(viewers.permissions.values_list("codename", flat=True)) == before


def test_the_django_admin_answers_a_wrong_key_with_the_503_page(client_for, superuser, viewer, settings, keys, system):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "sealed under the install's key")
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]  # a wrong key deployed
    form = {"username": viewer.username, "first_name": "V", "date_joined_0": "2025-01-01", "date_joined_1": "00:00:00"}
    response = client_for(superuser).post(f"/admin/auth/user/{viewer.pk}/change/", form | {"is_active": "on"})
    assert response.status_code == 503
    viewer.refresh_from_db()
    assert viewer.first_name == ""  # rolled back with its audit entry
