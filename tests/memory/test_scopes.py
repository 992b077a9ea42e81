"""Scope derivation (docs/design.md §2): every rule, and the refusals."""

from __future__ import annotations

import pytest

from memconsole.memory.errors import ValidationError
from memconsole.memory.models import Scope
from memconsole.memory.scopes import derive_scope, keys_of, register_scope, unregistered_scopes


def test_it_derives_session_isolation_keys_with_a_bot():
    keys = derive_scope("bot-a", "group_123", "session")
    assert keys.bot_uuid == "bot-a"
    assert keys.session_name == "group_123"
    assert keys.isolation == "session"
    assert keys.scope_key == keys.session_key == "bot-a:group_123"
    assert keys.user_key == "bot-a:group_123"


def test_it_derives_bot_isolation_keys_with_a_bot():
    keys = derive_scope("bot-a", "person_42", "bot")
    assert keys.scope_key == "bot-a:person_42"
    assert keys.user_key == "bot:bot-a"


def test_it_shares_the_user_key_across_sessions_of_one_bot_only_in_bot_isolation():
    one, two = derive_scope("bot-a", "group_1", "bot"), derive_scope("bot-a", "person_2", "bot")
    assert one.user_key == two.user_key == "bot:bot-a"
    assert one.scope_key != two.scope_key
    assert derive_scope("bot-b", "group_1", "bot").user_key == "bot:bot-b"
    assert derive_scope("bot-a", "group_1", "session").user_key != derive_scope("bot-a", "person_2", "session").user_key


def test_it_uses_the_session_name_alone_without_a_bot():
    for bot_uuid in (None, "", "   "):
        keys = derive_scope(bot_uuid, "group_123", "session")
        assert keys.bot_uuid == ""
        assert keys.scope_key == "group_123"
        assert keys.user_key == "group_123"


def test_it_uses_global_for_bot_isolation_without_a_bot():
    keys = derive_scope(None, "group_123", "bot")
    assert keys.scope_key == "group_123"
    assert keys.user_key == "global"
    assert derive_scope("", "person_9", "bot").user_key == "global"


def test_it_defaults_to_session_isolation():
    assert derive_scope("bot-a", "group_1").isolation == "session"
    assert derive_scope("bot-a", "group_1", None).user_key == "bot-a:group_1"
    assert derive_scope("bot-a", "group_1", "").isolation == "session"


@pytest.mark.parametrize(
    ("session_name", "launcher_type", "launcher_id"),
    [
        ("group_123", "group", "123"),
        ("person_42", "person", "42"),
        ("group_123_456", "group", "123_456"),
        ("_leading", "", "leading"),
        ("trailing_", "trailing", ""),
        ("imported-session", "imported-session", ""),
        ("会话_七", "会话", "七"),
    ],
)
def test_it_splits_launcher_type_and_id_at_the_first_underscore(session_name, launcher_type, launcher_id):
    keys = derive_scope("bot-a", session_name, "session")
    assert (keys.launcher_type, keys.launcher_id) == (launcher_type, launcher_id)


def test_it_accepts_names_without_underscore_as_they_are():
    keys = derive_scope("bot-a", "slack-C024BE91L", "session")
    assert keys.session_name == "slack-C024BE91L"  # no "_" appended, unlike LangBot
    assert keys.scope_key == "bot-a:slack-C024BE91L"


def test_it_accepts_a_name_of_exactly_255_printable_characters():
    name = "g_" + "x" * 253
    assert derive_scope("bot-a", name).session_name == name


@pytest.mark.parametrize(
    ("bot_uuid", "session_name", "isolation", "field"),
    [
        ("bot-a", "", "session", "session_name"),
        ("bot-a", "   ", "session", "session_name"),
        ("bot-a", None, "session", "session_name"),
        ("bot-a", 123, "session", "session_name"),
        ("bot-a", "g_" + "x" * 254, "session", "session_name"),
        ("bot-a", "group_1\n", "session", "session_name"),
        ("bot-a", "group\x00_1", "session", "session_name"),
        ("bot-a", "group_\x1b[31m", "session", "session_name"),
        ("bot-a", "group_1", "team", "isolation"),
        ("bot-a", "group_1", "Session", "isolation"),
        ("bot-a", "group_1", 1, "isolation"),
        ("b" * 129, "group_1", "session", "bot_uuid"),
        ("bot:a", "group_1", "session", "bot_uuid"),
        ("bot a", "group_1", "session", "bot_uuid"),
        ("bot\ta", "group_1", "session", "bot_uuid"),
        (42, "group_1", "session", "bot_uuid"),
    ],
)
def test_it_refuses_malformed_input_naming_the_field(bot_uuid, session_name, isolation, field):
    with pytest.raises(ValidationError) as caught:
        derive_scope(bot_uuid, session_name, isolation)
    assert caught.value.field == field
    assert field in caught.value.message


@pytest.mark.parametrize(
    ("bot_uuid", "session_name", "isolation", "collides_with"),
    [
        # a session with no bot whose name looks like "<bot>:<session>" would share that bot's keys
        (None, "bot-a:group_100", "session", ("bot-a", "group_100", "session")),
        # ... or the "bot:<uuid>" key of a bot-isolated scope
        (None, "bot:bot-a", "session", ("bot-a", "group_100", "bot")),
        # ... or the "global" key of bot isolation without a bot
        (None, "global", "session", (None, "group_1", "bot")),
        # a bot named "bot" would share "bot:<session>" with bot isolation of a bot named like the session
        ("bot", "bot-a", "session", ("bot-a", "group_100", "bot")),
    ],
)
def test_it_refuses_names_whose_keys_would_collide_with_another_scope(bot_uuid, session_name, isolation, collides_with):
    with pytest.raises(ValidationError) as caught:
        derive_scope(bot_uuid, session_name, isolation)
    assert caught.value.field in ("session_name", "bot_uuid")
    other = derive_scope(*collides_with)
    assert other.user_key  # the scope it would have collided with stays valid


def test_it_keeps_distinct_scopes_on_distinct_keys():
    scopes = [
        derive_scope("bot-a", "group_1", "session"),
        derive_scope("bot-a", "group_1", "bot"),
        derive_scope("bot-b", "group_1", "session"),
        derive_scope("bot-b", "group_1", "bot"),
        derive_scope(None, "group_1", "session"),
        derive_scope(None, "group_1", "bot"),
        derive_scope("bot-a", "a:group_1", "session"),
        derive_scope("bot-aa", "group_1", "session"),
    ]
    user_keys = [s.user_key for s in scopes]
    assert len(set(user_keys)) == len(user_keys)


def test_it_registers_a_scope_once_and_derives_the_same_keys_back(db):
    keys = derive_scope("bot-a", "group_7", "bot")
    first = register_scope(keys)
    again = register_scope(keys)
    assert first.pk == again.pk
    assert Scope.objects.count() == 1
    row = Scope.objects.get()
    assert (row.bot_uuid, row.session_name, row.isolation, row.scope_key, row.user_key) == (
        "bot-a",
        "group_7",
        "bot",
        "bot-a:group_7",
        "bot:bot-a",
    )
    assert keys_of(row) == keys


def test_it_registers_both_isolations_of_one_session_as_two_scopes(db):
    register_scope(derive_scope("bot-a", "group_7", "session"))
    register_scope(derive_scope("bot-a", "group_7", "bot"))
    assert sorted(Scope.objects.values_list("isolation", "user_key")) == [
        ("bot", "bot:bot-a"),
        ("session", "bot-a:group_7"),
    ]


@pytest.mark.parametrize(
    "bot_uuid", ["memconsole-health-probe", "Memconsole-Health-Probe", " memconsole-health-probe "]
)
@pytest.mark.parametrize("isolation", ["session", "bot"])
def test_it_reserves_the_health_probes_bot_for_the_probe(bot_uuid, isolation):
    with pytest.raises(ValidationError) as caught:
        derive_scope(bot_uuid, "group_1", isolation)
    assert caught.value.field == "bot_uuid"

    with unregistered_scopes():  # how the probe derives its canary scopes
        keys = derive_scope("memconsole-health-probe", "probe_1a", "session")
    assert keys.user_key == "memconsole-health-probe:probe_1a"


@pytest.mark.parametrize("session_name", ["group_1001 ", " group_1001", "  group_1001  "])
def test_it_trims_spaces_around_a_session_name_so_no_look_alike_space_exists(session_name):
    keys = derive_scope("bot-a", session_name, "session")
    assert keys == derive_scope("bot-a", "group_1001", "session")
    assert (keys.session_name, keys.scope_key, keys.launcher_id) == ("group_1001", "bot-a:group_1001", "1001")
    assert derive_scope(None, session_name, "bot").scope_key == "group_1001"
