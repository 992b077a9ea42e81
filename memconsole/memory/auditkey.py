"""The audit log's key (MEMCONSOLE_AUDIT_KEY, or one derived from SECRET_KEY) and its public fingerprint."""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

GENESIS = "0" * 64  # the previous hash of a chain's first entry, and of the first checkpoint


def audit_key() -> bytes:
    key: str | None = settings.MEMCONSOLE_AUDIT_KEY
    if key:
        return key.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"memconsole-audit-chain-v1", hashlib.sha256).digest()


def key_id() -> str:
    """A public fingerprint of the audit key (`InstallState.audit_key_id`; reveals nothing of it)."""
    return hmac.new(audit_key(), b"memconsole-audit-key-id", hashlib.sha256).hexdigest()[:16]
