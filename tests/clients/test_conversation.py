"""End to end: a bot plays a conversation through the memconsole_client package against a live server.

Two group chats and one private chat, three speakers (Alice and Bob in English, 陈伟 in Chinese), a
correction that supersedes an earlier fact; recall and inject are checked at each step.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.utils import timezone
from memconsole_client import MemconsoleError, MemoryClient, Retry

from memconsole.memory import tokens
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = {"sender_id": "u1", "sender_name": "Alice"}
BOB = {"sender_id": "u2", "sender_name": "Bob"}
CHEN = {"sender_id": "u3", "sender_name": "陈伟"}


def contents(hits: list[dict]) -> list[str]:
    return [hit["content"] for hit in hits]


@pytest.fixture
def bot(live_server):
    row, secret = tokens.create_token("langbot e2e", ["bot-a"], Actor.system("tests"))
    return row, MemoryClient(live_server.url, secret, bot_uuid="bot-a", session_name="group_100")


def test_it_plays_a_conversation_through_the_client(bot):
    token, hiking = bot  # group_100: a hiking club
    office = hiking.for_session("group_200")  # group_200: an office chat
    private = hiking.for_session("person_u3")  # private chat with 陈伟

    # 1. The hiking group: Alice and Bob introduce themselves.
    hiking.update_profile(name="Weekend hiking club", notes="Plans a hike every Saturday")
    hiking.update_profile("speaker", "u1", name="Alice", add_traits=["early riser"], add_preferences=["window seats"])
    paris = hiking.remember("Alice lives in Paris", tags=["home"], importance=3, **ALICE)
    assert paris["status"] == "active" and paris["superseded"] == []
    hiking.remember(
        "Bob is allergic to peanuts, never pack peanut snacks for him", tags=["health"], importance=5, **BOB
    )

    hits = hiking.recall("Where does Alice live?", top_k=1)
    assert contents(hits) == ["Alice lives in Paris"]
    assert hits[0]["sender_name"] == "Alice" and hits[0]["importance"] == 3
    assert contents(hiking.recall("what snacks can Bob eat", top_k=1)) == [
        "Bob is allergic to peanuts, never pack peanut snacks for him"
    ]

    # 2. The office group: 陈伟 speaks Chinese; Alice mentions lunch. Nothing leaks between chats.
    office.remember("陈伟在上海工作，负责数据平台", tags=["work"], **CHEN)
    sushi = office.remember("Alice wants sushi for the team lunch on Friday", tags=["lunch"], **ALICE)
    assert contents(office.recall("陈伟在哪里工作", top_k=1)) == ["陈伟在上海工作，负责数据平台"]
    assert "Alice lives in Paris" not in contents(office.recall("Where does Alice live?", top_k=5))
    assert not any("陈伟" in c for c in contents(hiking.recall("陈伟在哪里工作", top_k=5)))

    # 3. The private chat with 陈伟.
    private.update_profile("speaker", "u3", name="陈伟", add_traits=["喜欢喝绿茶"])
    birthday = private.remember("我的生日是五月三日", tags=["birthday"], importance=4, **CHEN)
    injection = private.inject("我的生日是哪天？", query_id="p-1", **CHEN)
    assert contents(injection["context"]["episodes"])[0] == "我的生日是五月三日"
    assert injection["context"]["speaker"] == {"id": "u3", "name": "陈伟"}
    assert injection["context"]["speaker_profile"]["traits"] == ["喜欢喝绿茶"]
    assert any("我的生日是五月三日" in block for block in injection["system_blocks"])
    assert not any("Paris" in block or "sushi" in block for block in injection["system_blocks"])

    # 4. Before the correction, the hiking group's injection tells the model Alice lives in Paris.
    before = hiking.inject("Where do I live?", query_id="h-1", **ALICE)
    assert contents(before["context"]["episodes"])[0] == "Alice lives in Paris"
    assert before["context"]["session_profile"]["name"] == "Weekend hiking club"
    assert before["context"]["speaker_profile"]["preferences"] == ["window seats"]

    # 5. Alice corrects herself: the Paris fact is superseded, in this chat only.
    berlin = hiking.remember("Alice lives in Berlin, not Paris", tags=["correction"], importance=3, **ALICE)
    assert berlin["superseded"] == [paris["episode_id"]]
    hits = hiking.recall("Where does Alice live?", top_k=5)
    assert contents(hits)[0] == "Alice lives in Berlin, not Paris"
    assert paris["episode_id"] not in [h["episode_id"] for h in hits]
    assert hits[0]["breakdown"]["update"] > 1  # a correction is weighted up
    old = hiking.recall("Where does Alice live?", statuses=["superseded"])
    assert [(h["episode_id"], h["status"]) for h in old] == [(paris["episode_id"], "superseded")]

    after = hiking.inject("Where do I live?", query_id="h-2", **ALICE)
    assert contents(after["context"]["episodes"])[0] == "Alice lives in Berlin, not Paris"
    assert "Alice lives in Paris" not in contents(after["context"]["episodes"])
    assert any("Berlin" in block for block in after["system_blocks"])
    # Bob's allergy is untouched by Alice's correction.
    assert contents(hiking.recall("peanut allergy", top_k=1))[0].startswith("Bob is allergic")

    # 6. The office forgets the lunch; the private chat keeps its birthday.
    assert office.forget(sushi["episode_id"]) is True
    assert "Alice wants sushi for the team lunch on Friday" not in contents(office.recall("team lunch", top_k=5))
    with pytest.raises(MemconsoleError) as gone:
        office.forget(sushi["episode_id"])
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    with pytest.raises(MemconsoleError):
        hiking.forget(birthday["episode_id"])  # another chat's episode: 404, and it stays
    assert contents(private.recall("生日", top_k=1)) == ["我的生日是五月三日"]

    # 7. Bot-wide memory (isolation "bot") is shared by every chat of this bot.
    shared = hiking.for_session("group_100", isolation="bot")
    shared.remember("The bot's nickname is Memo", **BOB)
    assert contents(private.for_session("person_u3", isolation="bot").recall("what is the bot called", top_k=1)) == [
        "The bot's nickname is Memo"
    ]
    assert "The bot's nickname is Memo" not in contents(private.recall("what is the bot called", top_k=5))

    # 8. Everything the bot wrote is audited under its token, and injections are kept as snapshots.
    actor = f"token:{token.prefix}:langbot e2e"
    writes = AuditEntry.objects.filter(operation__in=["remember", "delete", "profile_update", "inject"])
    assert set(writes.values_list("actor", flat=True)) == {actor}
    assert writes.filter(operation="remember").count() == 7
    assert list(InjectionSnapshot.objects.order_by("id").values_list("query_id", flat=True)) == ["p-1", "h-1", "h-2"]
    assert verify_audit_chain().ok


def test_it_raises_clear_errors_from_the_client(bot, live_server):
    _, hiking = bot
    with pytest.raises(MemconsoleError) as invalid:
        hiking.recall("x", importance_min=9)  # a filter: 1-5 (remember's importance 9 is stored as 5)
    assert (invalid.value.status, invalid.value.code, invalid.value.field) == (422, "invalid", "importance_min")
    with pytest.raises(MemconsoleError) as forbidden:
        MemoryClient(live_server.url, hiking.token, "bot-b", "group_100").recall("anything")
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    with pytest.raises(MemconsoleError) as unauthorized:
        MemoryClient(live_server.url, "mct_nope", "bot-a", "group_100").recall("anything")
    assert unauthorized.value.status == 401
    # A time without a zone is UTC, as the server reads it (it used to be refused in the client).
    naive = hiking.remember("naive", timestamp=datetime(2025, 1, 1))  # noqa: DTZ001  # naive on purpose
    assert hiking.recall("naive", top_k=1)[0]["episode_id"] == naive["episode_id"]
    assert Episode.objects.get(episode_id=naive["episode_id"]).timestamp == datetime(2025, 1, 1, tzinfo=UTC)
    with pytest.raises(MemconsoleError) as not_json:  # was a bare ValueError from json.dumps
        hiking.remember("x", importance=float("nan"))
    assert (not_json.value.status, not_json.value.code) == (0, "invalid")
    with pytest.raises(MemconsoleError) as unreachable:
        MemoryClient("http://127.0.0.1:9", "t", "bot-a", "g", timeout=2).recall("x")
    assert (unreachable.value.status, unreachable.value.code) == (0, "unreachable")


def test_it_reports_the_rate_limit_with_retry_after(bot, settings):
    _, hiking = bot
    hiking.retry = Retry.never()  # by default the client waits out a short Retry-After (see test_retries.py)
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 1
    if timezone.now().second >= 57:
        time.sleep(4)
    hiking.get_profile()
    with pytest.raises(MemconsoleError) as limited:
        hiking.get_profile()
    assert limited.value.status == 429 and limited.value.code == "rate_limited"
    assert 1 <= limited.value.retry_after <= 60
