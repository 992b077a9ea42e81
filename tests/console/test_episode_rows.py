"""Denser, calmer rows (issue 17): one actions menu per row (a <details>, no JavaScript needed),
archive and restore without a confirm dialog but with an Undo, a truthful delete confirmation."""

from __future__ import annotations

import re

import pytest
from django.urls import NoReverseMatch, reverse

from memconsole.memory.models import AuditEntry, Episode
from tests.factories import plain_episodes

from .conftest import htmx

pytestmark = pytest.mark.django_db


def page_text(response, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return response.content.decode()


def row_of(page: str, episode_id: str) -> str:
    found = re.search(rf'<tr id="episode-{episode_id}".*?</tr>', page, re.S)
    assert found, f"no row for {episode_id}"
    return found.group(0)


def edit_url(scope_pk: int, episode_id: str) -> str | None:
    try:
        return reverse("console:episode_edit", args=[scope_pk, episode_id])
    except NoReverseMatch:
        return None


def test_each_row_has_one_actions_menu(admin_client_, url, light_scope, keys):
    episode = plain_episodes(keys, 1)[0]
    row = row_of(page_text(admin_client_.get(url("episodes", light_scope.pk))), episode.episode_id)
    assert row.count('<details class="row-menu">') == 1
    assert f'<summary aria-label="Actions for episode {episode.episode_id}">Actions</summary>' in row
    menu = re.search(r'<div class="row-menu-items">(.*?)</div>', row).group(1)
    assert f'href="{url("episode_detail", light_scope.pk, episode.episode_id)}">Open</a>' in menu
    assert ">Archive</button>" in menu and ">Delete…</button>" in menu
    if edit := edit_url(light_scope.pk, episode.episode_id):
        assert f'href="{edit}">Edit</a>' in menu


def test_archive_and_restore_ask_no_native_confirm_and_delete_does_truthfully(admin_client_, url, light_scope, keys):
    episode = plain_episodes(keys, 1)[0]
    row = row_of(page_text(admin_client_.get(url("episodes", light_scope.pk))), episode.episode_id)
    archive = re.search(r"<button [^>]*>Archive</button>", row).group(0)
    assert "hx-confirm" not in archive
    delete = re.search(r"<button [^>]*>Delete…</button>", row).group(0)
    assert "The audit log keeps a copy of its content (its before-image) unless the person is erased." in delete


def test_the_no_javascript_delete_page_says_what_stays(admin_client_, url, light_scope, keys):
    episode = plain_episodes(keys, 1)[0]
    page = page_text(admin_client_.post(url("episode_delete", light_scope.pk, episode.episode_id)))
    assert "The audit log keeps a copy of its content (its before-image) unless the person is erased" in page


def test_an_inline_archive_offers_an_undo_that_restores(operator_client, url, light_scope, keys):
    episode = plain_episodes(keys, 1)[0]
    back = url("episodes", light_scope.pk)
    html = page_text(
        operator_client.post(url("episode_archive", light_scope.pk, episode.episode_id), {"next": back}, **htmx())
    )
    undo = re.search(r'<button [^>]*class="link undo"[^>]*>Undo</button>', html).group(0)
    restore_url = url("episode_restore", light_scope.pk, episode.episode_id)
    assert f'hx-post="{restore_url}"' in undo and f'formaction="{restore_url}"' in undo
    assert """hx-vals='{"undo": "1"}'""" in undo and f"Undo: restore episode {episode.episode_id}" in undo
    html = page_text(operator_client.post(restore_url, {"next": back, "undo": "1"}, **htmx()))
    assert "is active again" in html and 'class="link undo"' not in html  # an undo is not undone again
    assert Episode.objects.get(pk=episode.pk).status == "active"
    assert list(AuditEntry.objects.order_by("id").values_list("operation", flat=True))[-2:] == ["archive", "restore"]


def test_restoring_an_archived_episode_offers_an_undo_but_a_superseded_one_not(operator_client, url, light_scope, keys):
    archived, superseded = plain_episodes(keys, 2, status=lambda n: ["archived", "superseded"][n])
    html = page_text(operator_client.post(url("episode_restore", light_scope.pk, archived.episode_id), **htmx()))
    assert 'class="link undo"' in html and f"Undo: archive episode {archived.episode_id}" in html
    html = page_text(operator_client.post(url("episode_restore", light_scope.pk, superseded.episode_id), **htmx()))
    assert 'class="link undo"' not in html


def test_a_viewer_gets_open_but_no_actions(viewer_client, url, light_scope, keys):
    episode = plain_episodes(keys, 1)[0]
    row = row_of(page_text(viewer_client.get(url("episodes", light_scope.pk))), episode.episode_id)
    assert "row-menu" not in row and ">Open</a>" in row and "read only" in row
    assert viewer_client.post(url("episode_restore", light_scope.pk, episode.episode_id), **htmx()).status_code == 403


def test_another_scopes_episode_is_404(operator_client, url, light_scope, other_scope, other_keys):
    other = Episode.objects.in_scope(other_keys.user_key).first()
    response = operator_client.post(url("episode_archive", light_scope.pk, other.episode_id), **htmx())
    assert response.status_code == 404
