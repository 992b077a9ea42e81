"""Fixtures for the bot API: tokens for bot-a and bot-b and a JSON client that sends them."""

from __future__ import annotations

import json
import time
from types import EllipsisType
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from memconsole.memory import tokens
from memconsole.memory.audit import Actor
from memconsole.memory.models import AuditEntry, Episode, InjectionSnapshot, Profile, ProfileVersion, Scope

from .openapi_check import assert_matches_openapi

SCOPE_A = {"bot_uuid": "bot-a", "session_name": "group_100"}
SCOPE_B = {"bot_uuid": "bot-b", "session_name": "group_200"}


class Api:
    """Django's test client speaking JSON with a bearer token; every answer is checked against the
    OpenAPI document, so each test also keeps the document true."""

    def __init__(self, secret: str | None) -> None:
        self.client = Client()
        self.secret = secret

    def _headers(self, secret: str | EllipsisType | None) -> dict[str, str]:
        secret = self.secret if secret is ... else secret
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    def post(self, endpoint: str, body: Any = None, *, raw: bytes | str | None = None, secret: Any = ..., **extra: Any):
        data = raw if raw is not None else json.dumps(body if body is not None else {}, ensure_ascii=False)
        response = self.client.post(
            f"/api/v1/{endpoint}", data=data, content_type="application/json", headers=self._headers(secret), **extra
        )
        assert_matches_openapi("post", endpoint, response)
        return response

    def get(self, endpoint: str, params: dict[str, Any] | None = None, *, secret: Any = ...):
        response = self.client.get(f"/api/v1/{endpoint}", params or {}, headers=self._headers(secret))
        assert_matches_openapi("get", endpoint, response)
        return response

    def request(self, method: str, endpoint: str, secret: Any = ..., **kwargs: Any):
        response = getattr(self.client, method.lower())(f"/api/v1/{endpoint}", headers=self._headers(secret), **kwargs)
        assert_matches_openapi(method.lower(), endpoint, response)
        return response


@pytest.fixture
def token_a(db):
    """(row, secret) of a token holding bot-a only."""
    return tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))


@pytest.fixture
def token_b(db):
    return tokens.create_token("bot b", ["bot-b"], Actor.system("tests"))


@pytest.fixture
def api(token_a):
    return Api(token_a[1])


@pytest.fixture
def api_b(token_b):
    return Api(token_b[1])


def memory_rows() -> dict[str, int]:
    """Row counts of everything an API call may write (audit included)."""
    return {
        model.__name__: model.objects.count()
        for model in (Episode, AuditEntry, Profile, ProfileVersion, InjectionSnapshot, Scope)
    }


def clear_of_minute_boundary(margin: int = 10) -> None:
    """Wait for the next clock minute when fewer than `margin` seconds are left of this one: the rate
    limit counts per clock minute (api/ratelimit.py), and a test's requests must fall in one."""
    left = 60 - timezone.now().second
    if left <= margin:
        time.sleep(left + 1)
