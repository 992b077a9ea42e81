"""The integrity checks: `index_drift` (`reindex --check`), `audit_chain`, `encryption`."""

from __future__ import annotations

from django.conf import settings

from memconsole.lib import crypto, embeddings

from .. import audit, reindex, rotation
from .result import ERROR, OK, REINDEX_FIX, WARN, Check


def check_index_drift() -> Check:
    report = reindex.reindex(check_only=True)
    counted = f"{report.episodes} episodes and {report.vectors} vectors in {report.scopes} scopes checked"
    if report.errors:
        return Check("index_drift", ERROR, f"{counted}; errors: {'; '.join(report.errors[:3])}", REINDEX_FIX)
    if report.drift:
        fix = "Run `python manage.py reindex` (`--check` reports without changing anything)."
        if report.foreign_model_collections and embeddings.get_embedder().is_fallback:
            fix = (
                "The embedding model is missing (see the embedding check): install it first, otherwise "
                "`python manage.py reindex` re-embeds everything with the lexical fallback. " + fix
            )
        return Check(
            "index_drift",
            WARN,
            f"the vector index is out of step with the database: {report.describe_drift()} ({counted})",
            fix,
        )
    return Check("index_drift", OK, f"the vector index matches the database ({counted})")


def check_audit_chain() -> Check:
    report = audit.verify_audit_chain()
    if report.ok:
        return Check("audit_chain", OK, f"the audit chain verifies: {report.checked} entries")
    return Check(
        "audit_chain",
        ERROR,
        str(report),
        f"Entry #{report.broken_seq} was changed, inserted or deleted outside memconsole. Compare it with your "
        "latest backup to see what changed; the chain cannot be repaired in place, and new entries keep "
        "being appended after it.",
    )


def check_encryption() -> Check:
    census = rotation.encryption_census()
    rows = sum(c.rows for c in census.values())
    encrypted = sum(c.encrypted for c in census.values())
    newest = sum(c.newest for c in census.values())
    older = sum(c.older for c in census.values())
    plain = sum(c.plain for c in census.values())
    unreadable = sum(c.unreadable for c in census.values())
    if not crypto.enabled():
        if encrypted == 0:
            return Check(
                "encryption", OK, f"encryption at rest is off ({crypto.SETTING} is not set); no row is encrypted"
            )
        return Check(
            "encryption",
            ERROR,
            f"{encrypted} rows are encrypted but {crypto.SETTING} is not set: they cannot be read",
            f"Set {crypto.SETTING} to the key(s) this data was written with (newest first) and restart.",
        )
    key_count = len(settings.MEMCONSOLE_FERNET_KEYS)
    if unreadable:
        first = next(f"{name} #{c.first_unreadable}" for name, c in census.items() if c.unreadable)
        return Check(
            "encryption",
            ERROR,
            f"{unreadable} encrypted rows open with none of the {key_count} configured keys (first: {first})",
            f"Add the key they were written with to {crypto.SETTING} (after the newest) and restart. Remove a key "
            "only after `python manage.py rotate_keys` reports no unreadable rows.",
        )
    share = f"{100.0 * newest / rows:.1f}%" if rows else "100%"
    configured = f"{key_count} key{'s' if key_count != 1 else ''} configured"
    detail = f"encryption at rest is on ({configured}): {share} of {rows} rows are under the newest key"
    if older or plain:
        parts = []
        if older:
            parts.append(f"{older} under an older key")
        if plain:
            parts.append(f"{plain} not encrypted (written before keys were set)")
        return Check("encryption", WARN, f"{detail}; {', '.join(parts)}", "Run `python manage.py rotate_keys`.")
    if key_count > 1 and encrypted:
        detail += "; the older keys can be removed"
    return Check("encryption", OK, detail)
