"""The audit log's summaries in the reader's language: each entry is stored in English (exports
and the chain carry that) with the message and values it was made from, and the console says it
again in Chinese or Spanish. Entries written as plain text read as stored; an erased person's
entries keep nothing to fill a message with."""

from __future__ import annotations

import pytest
from django.db import transaction

from memconsole.memory import audit, editing, episodes, tokens
from memconsole.memory.erasure import erase_subject
from memconsole.memory.models import AuditEntry

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
SPANISH = {"HTTP_ACCEPT_LANGUAGE": "es"}


def audit_page(client, query: dict | None = None, **headers) -> str:
    response = client.get("/audit/", query or {}, **headers)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_it_shows_summaries_in_chinese_and_spanish(viewer_client, scope_with_episodes, system):
    tokens.create_token("support bot", ["bot-a"], system)

    chinese = audit_page(viewer_client, **CHINESE)
    assert "已记住：I am planning a trip to Beijing next month" in chinese
    assert "归档：活跃 → 已归档" in chinese  # the statuses by their labels
    assert "已为 bot-a 创建机器人令牌 &#x27;support bot&#x27;" in chinese
    assert "remembered: I am planning" not in chinese

    spanish = audit_page(viewer_client, **SPANISH)
    assert "recordado: My favourite food is dumplings" in spanish
    assert "archivado: activo → archivado" in spanish
    assert "token de bot &#x27;support bot&#x27;" in spanish

    assert "remembered: I am planning a trip to Beijing next month" in audit_page(viewer_client)


def test_it_stores_the_summary_in_english_with_what_translates_it(scope_with_episodes):
    entry = AuditEntry.objects.filter(operation="archive").get()
    assert entry.payload["summary"] == "archive: active → archived"
    assert entry.payload["said"] == {
        "message": "archive: %(before)s → %(status)s",
        "values": {"before": "active", "status": "archived"},
        "statuses": ["before", "status"],
    }


def test_it_names_the_fields_an_edit_changed_in_the_readers_language(viewer_client, scope_with_episodes, keys, system):
    editing.edit_episode(keys, system, scope_with_episodes[0].episode_id, content="A trip to Chengdu", tags=["trip"])
    assert "已编辑：内容, 标签" in audit_page(viewer_client, **CHINESE)
    assert AuditEntry.objects.get(operation="episode_edit").payload["summary"] == "edited: content, tags"


def test_it_shows_a_plain_text_summary_as_stored(viewer_client, keys, system):
    with transaction.atomic():
        audit.append("note", system, scope_key=keys.scope_key, summary="written before summaries were translatable")
    assert "written before summaries were translatable" in audit_page(viewer_client, **CHINESE)


def test_it_keeps_nothing_of_an_erased_persons_summary(viewer_client, scope_with_episodes, keys, system):
    episodes.remember(keys, system, "Alice's passport number is X123", sender_id="u1", sender_name="Alice")
    erase_subject("u1", bot_uuid="bot-a", actor=system)

    page = audit_page(viewer_client, **CHINESE)
    assert "X123" not in page and "Beijing" not in page
    assert "已记住：My favourite food is dumplings" in page  # Bob's memory is not Alice's
    redacted = AuditEntry.objects.filter(redacted=True)
    assert redacted.count() == 4 and all("said" not in entry.payload for entry in redacted)


def test_it_names_each_operation_in_the_readers_language_beside_its_code(viewer_client, scope_with_episodes, system):
    # the Operation column and the filter's picker showed only codes such as "supersede" in every language
    tokens.create_token("support bot", ["bot-a"], system)
    chinese = audit_page(viewer_client, **CHINESE)
    assert '<span class="operation">已归档</span> <code>archive</code>' in chinese
    assert '<span class="operation">机器人令牌已创建</span> <code>token_create</code>' in chinese
    assert '<option value="supersede">被更正取代</option>' in chinese  # the picker still filters by the code
    spanish = audit_page(viewer_client, **SPANISH)
    assert '<span class="operation">Recordado</span> <code>remember</code>' in spanish
