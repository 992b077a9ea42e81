"""The reasons the console gives for a refused import, in the reader's language: the domain writes
them in English (the API's words) and keeps what translates them (`memory/wording.py`), so a
Chinese or Spanish reader sees the file's error, the field's reason and the job's error in theirs."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memconsole.memory.models import Episode
from tests.jobs.work import follow_job

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
SPANISH = {"HTTP_ACCEPT_LANGUAGE": "es"}


def upload(content: bytes, name: str = "memories.json") -> dict:
    return {
        "file": SimpleUploadedFile(name, content, content_type="application/json"),
        "format": "langbot",
        "bot_uuid": "bot-c",
        "session_name": "",
        "isolation": "session",
    }


def langbot(*episodes: dict) -> bytes:
    return json.dumps({"version": 1, "scope_key": "old-bot:group_300", "episodes": list(episodes)}).encode()


def import_page(client, data: dict, **headers) -> str:
    response = client.post("/import/", data, **headers)
    if response.status_code == 302:
        response = follow_job(client, response, **headers)
    return response.content.decode()


def test_a_truncated_file_is_explained_in_chinese(admin_client_):
    page = import_page(admin_client_, upload(b'{"version": 1, "episodes": [{"content": "a"'), **CHINESE)
    assert "第 1 行第" in page and "文件被截断" in page
    assert "the file is truncated" not in page
    assert not Episode.objects.exists()


def test_a_fields_reason_is_explained_in_spanish(admin_client_):
    bad = langbot({"id": "e1", "content": "Alice likes tea", "importance": "very"})
    page = import_page(admin_client_, upload(bad), **SPANISH)
    assert "campo &#x27;importance&#x27;: debe ser un número entero del 1 al 5, no &#x27;very&#x27;" in page
    assert not Episode.objects.exists()


def test_the_english_reader_and_the_api_keep_the_english_words(admin_client_):
    bad = langbot({"id": "e1", "content": "Alice likes tea", "tags": [1]})
    page = import_page(admin_client_, upload(bad))
    assert "field &#x27;tags&#x27;: must be strings" in page


def test_an_empty_file_is_explained_in_chinese(admin_client_):
    page = import_page(admin_client_, upload(b"   \n"), **CHINESE)
    assert "文件为空" in page and "the file is empty" not in page


def test_a_bad_bot_uuid_is_explained_in_chinese(admin_client_):
    data = {**upload(langbot({"id": "e1", "content": "Alice likes tea"})), "bot_uuid": "bad bot"}
    page = import_page(admin_client_, data, **CHINESE)
    assert "bot_uuid 不能包含“:”、空格或不可打印字符" in page and "may not contain" not in page


@pytest.mark.parametrize(
    ("format_", "content", "chinese"),
    [
        ("memconsole", b'{"episodes": []}', "这看起来是 LangBot 导出，而不是 memconsole 导出"),
        ("langbot", b"null", "不是 LangBot 导出：文件必须包含一个 JSON 对象"),
        ("langbot", b"[1, 2, 3]", "episodes[0]：情景记忆必须是对象"),
        ("mem0", b'{"x": 1}', "不是 mem0 导出：没有“results”或“memories”列表"),
        ("letta", b'{"x": 1}', "不是 Letta 文件：没有代理、记忆块或归档段落"),
    ],
)
def test_a_file_of_another_shape_is_explained_in_chinese(admin_client_, format_, content, chinese):
    data = {**upload(content), "format": format_, "session_name": "group_1"}
    page = import_page(admin_client_, data, **CHINESE)
    assert chinese in page
