"""The demo workspace and the first start of `make run`."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from memconsole.memory import retrieval
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.models import (
    STATUS_ARCHIVED,
    STATUS_SUPERSEDED,
    Episode,
    EpisodeCounts,
    InjectionSnapshot,
    Profile,
    Scope,
)
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_demo(monkeypatch):
    monkeypatch.setattr("memconsole.memory.demo.EPISODES_PER_SCOPE", 12)


def test_it_loads_a_believable_workspace(small_demo, capsys):
    call_command("load_demo")
    assert "Demo loaded: 15 scopes" in capsys.readouterr().out
    assert Scope.objects.count() == 15
    assert set(Scope.objects.values_list("isolation", flat=True)) == {"session", "bot"}
    assert len(set(Scope.objects.values_list("bot_uuid", flat=True))) == 3
    assert Episode.objects.filter(status=STATUS_SUPERSEDED).exclude(superseded_by="").exists()
    assert Episode.objects.filter(status=STATUS_ARCHIVED).exists()
    assert Episode.objects.filter(content_stored__regex=r"[\u4e00-\u9fff]").exists()
    assert Profile.objects.filter(type="speaker").count() >= 40
    assert InjectionSnapshot.objects.count() == 60
    assert not Episode.objects.filter(vector_current=False).exists()
    for counts in EpisodeCounts.objects.all():
        assert counts.total == Episode.objects.filter(user_key=counts.user_key).count()
    assert verify_audit_chain().ok


def test_it_makes_demo_memory_searchable(small_demo):
    call_command("load_demo")
    keys = derive_scope("8c6e3f52-support-bot", "group_1001", "session")
    hits = retrieval.recall(keys, "holiday travel", top_k=3, statuses=["active", "archived", "superseded"])
    assert hits and all(hit.episode.user_key == keys.user_key for hit in hits)


def test_it_refuses_a_non_empty_database_unless_forced(small_demo):
    call_command("load_demo")
    with pytest.raises(CommandError, match="--force"):
        call_command("load_demo")
    call_command("load_demo", "--force")
    assert Scope.objects.count() == 15  # the same scopes, more episodes


def test_it_creates_the_admin_once_and_prints_the_password(small_demo, settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    call_command("first_start")
    out = capsys.readouterr().out
    password = out.split("password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert Episode.objects.exists()
    call_command("first_start")
    again = capsys.readouterr().out
    assert "password:" not in again
    assert get_user_model().objects.count() == 1
