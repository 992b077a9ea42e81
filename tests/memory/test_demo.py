"""The demo workspace and the first start of `make run`."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from memconsole.memory import lexical, retrieval
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.management.commands import first_start, load_demo
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


def test_it_puts_every_demo_episode_in_the_word_index(small_demo):
    # The first health check of a fresh install warned "episodes missing from the lexical index".
    call_command("load_demo")
    assert Episode.objects.count() > 100
    assert lexical.missing_count() == 0 and lexical.stale_scopes() == []


def test_it_refuses_a_non_empty_database_unless_forced(small_demo):
    call_command("load_demo")
    with pytest.raises(CommandError, match="--force"):
        call_command("load_demo")
    call_command("load_demo", "--force")
    assert Scope.objects.count() == 15  # the same scopes, more episodes


class Terminal(io.StringIO):
    """Stands in for /dev/tty: keeps what was written once the command closes it."""

    written = ""

    def close(self) -> None:
        Terminal.written += self.getvalue()
        super().close()


def test_it_creates_the_admin_once_and_shows_the_password_on_the_terminal_only(
    small_demo, settings, tmp_path, capsys, monkeypatch
):
    settings.VAR_DIR = tmp_path
    Terminal.written = ""
    monkeypatch.setattr("memconsole.memory.management.commands.first_start.open_terminal", Terminal)
    call_command("first_start")
    out = capsys.readouterr()
    password = Terminal.written.split("password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert password not in out.out + out.err and "shown on the terminal only" in out.out  # stdout may be a log
    assert Episode.objects.exists()
    call_command("first_start")
    again = capsys.readouterr().out
    assert "password:" not in again and "password:" not in Terminal.written.split(password, 1)[1]
    assert get_user_model().objects.count() == 1


def test_it_prints_how_to_set_the_password_when_there_is_no_terminal(
    small_demo, settings, tmp_path, capsys, monkeypatch
):
    settings.VAR_DIR = tmp_path
    monkeypatch.setattr("memconsole.memory.management.commands.first_start.open_terminal", lambda: None)
    call_command("first_start")
    out = capsys.readouterr().out
    admin = get_user_model().objects.get(username="admin")
    assert not admin.has_usable_password() and "manage.py changepassword admin" in out and "password:" not in out


def test_it_opens_no_terminal_where_there_is_none(monkeypatch):
    monkeypatch.setattr(first_start, "TERMINAL", Path("/nonexistent/tty"))
    assert first_start.open_terminal() is None


# Each supersede chain of the demo: (the fact, its correction), with the words they must share.
CHAINS = [
    (
        r"I'm planning a trip to (?P<place>.+) next month",
        r"Correction: the trip to (?P<place>.+) is the month after next",
    ),
    (r"My favourite food is (?P<was>.+)", r"Actually my favourite food is (?P<new>.+) now, not (?P<was>.+)"),
    (
        r"Our team meeting moved to (?P<was>\w+) at 10am",
        r"Update: the team meeting is on (?P<new>\w+) now, not (?P<was>\w+)",
    ),
    (
        r"I'm learning (?P<was>\w+) and practise",
        r"Update: I stopped learning (?P<was>\w+), I'm learning (?P<new>\w+) now",
    ),
    (r"我最喜欢吃(?P<was>.+)", r"更正：我现在最喜欢吃(?P<new>.+)了，不是(?P<was>.+)"),
    (r"我们的周会改到(?P<was>.+)上午十点", r"更新：周会从(?P<was>.+)改到(?P<new>.+)了"),
    (r"我下个月要去(?P<place>.+)旅行", r"更正：去(?P<place>.+)的旅行推迟到下下个月"),
    (r"Mi comida favorita es (?P<was>.+)", r"En realidad ahora mi comida favorita es (?P<new>.+), no (?P<was>.+)"),
    (
        r"El mes que viene me voy de viaje a (?P<place>.+)",
        r"Corrección: el viaje a (?P<place>.+) es dentro de dos meses",
    ),
]


def chain_of(old: str, new: str) -> bool:
    """Whether `new` corrects `old`: one of CHAINS, the same place kept or the changed word really changed."""
    for fact, correction in CHAINS:
        before, after = re.match(fact, old), re.match(correction, new)
        if before and after:
            kept = all(before[name] == value for name, value in after.groupdict().items() if name != "new")
            changed = "new" not in after.groupdict() or after["new"] != before["was"]
            return kept and changed
    return False


def test_it_makes_each_supersede_chain_replace_a_fact_with_its_correction(small_demo):
    call_command("load_demo")
    superseded = list(Episode.objects.filter(status=STATUS_SUPERSEDED))
    assert len(superseded) >= 15
    newer = {e.episode_id: e for e in Episode.objects.filter(episode_id__in=[o.superseded_by for o in superseded])}
    wrong = [
        (o.content, newer[o.superseded_by].content)
        for o in superseded
        if not chain_of(o.content, newer[o.superseded_by].content)
    ]
    assert wrong == []
    assert all(newer[o.superseded_by].timestamp > o.timestamp for o in superseded)  # the correction comes later


# What a person says about themselves (by its tags): once per chat, the same in every chat.
ABOUT_THEMSELVES = [
    ["food", "preference"],
    ["work", "fact"],
    ["pet", "fact"],
    ["learning", "hobby"],
    ["personal", "fact"],
    ["health", "fact"],
    ["family", "fact"],
]


@pytest.fixture
def group_demo(monkeypatch):
    """Group chats of 60 episodes: enough for every member to say most of what they would."""
    monkeypatch.setattr("memconsole.memory.demo.EPISODES_PER_SCOPE", 60)
    call_command("load_demo")
    return list(Episode.objects.exclude(status=STATUS_SUPERSEDED))


def test_no_one_says_two_things_about_themselves_that_contradict(group_demo):
    """Found by a new user: Bob had three favourite foods in one chat, another person 23 copies of
    one preference. Each statement about oneself is made once per chat and is the same everywhere."""
    said: dict[tuple[str, str, str], list[str]] = {}
    everywhere: dict[tuple[str, str], set[str]] = {}
    for episode in group_demo:
        if episode.tags in ABOUT_THEMSELVES:
            kind = ",".join(episode.tags)
            said.setdefault((episode.user_key, episode.sender_id, kind), []).append(episode.content)
            everywhere.setdefault((episode.sender_id, kind), set()).add(episode.content)
    assert said and all(len(texts) == 1 for texts in said.values()), [t for t in said.values() if len(t) > 1][:3]
    assert all(len(texts) == 1 for texts in everywhere.values()), [t for t in everywhere.values() if len(t) > 1][:3]


def test_no_one_says_the_same_words_twice_in_a_chat(group_demo):
    seen: dict[tuple[str, str, str], int] = {}
    for episode in group_demo:
        key = (episode.user_key, episode.sender_id, episode.content)
        seen[key] = seen.get(key, 0) + 1
    assert [key[2] for key, n in seen.items() if n > 1] == []


def test_no_one_is_allergic_to_their_favourite_food(group_demo):
    foods = {
        e.sender_id: e.content.removeprefix("My favourite food is ")
        for e in group_demo
        if e.tags == ["food", "preference"]
    }
    allergies = {
        e.sender_id: e.content.removeprefix("I am allergic to ") for e in group_demo if e.tags == ["health", "fact"]
    }
    assert [who for who in foods if who in allergies and foods[who] == allergies[who]] == []


def test_profiles_never_prefer_answers_in_two_languages(group_demo):
    for profile in Profile.objects.filter(type="speaker"):
        languages = [p for p in profile.payload.get("preferences", []) if p.startswith("answers in")]
        assert len(languages) <= 1, (profile.payload["name"], languages)


def test_people_speak_english_chinese_and_spanish(group_demo):
    texts = [episode.content for episode in group_demo]
    assert any(re.search(r"[\u4e00-\u9fff]", text) for text in texts)
    assert any(text.startswith(("Mi comida favorita", "Tengo un perro", "Esta noche cenamos")) for text in texts)
    assert any(snapshot.payload["query"].startswith("¿") for snapshot in InjectionSnapshot.objects.all())


class ColourTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_its_progress_on_a_terminal_is_not_coloured_as_an_error(small_demo):
    """Found by a new user: `make run` printed the demo's progress in bold red, like errors."""
    out, err = ColourTerminal(), ColourTerminal()
    call_command(load_demo.Command(stdout=out, stderr=err, force_color=True))  # as manage.py starts it on a terminal
    assert "scope 1/15" in out.getvalue() and "\x1b[31" not in out.getvalue() and err.getvalue() == ""
