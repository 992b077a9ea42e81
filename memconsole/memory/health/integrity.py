"""The integrity checks: `index_drift` (`reindex --check`), `audit_chain`, `row_integrity`
(`tamper`: every episode and profile against its sealed identity and the chain), `encryption`."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext_noop

from memconsole.lib import crypto, embeddings

from .. import audit, checkpoints, reindex, rotation, tamper
from ..install import InstallState
from ..models import AuditEntry
from ..wording import said
from .result import ERROR, OK, REINDEX_FIX, WARN, Check


def check_index_drift() -> Check:
    report = reindex.reindex(check_only=True)
    counted = said(
        gettext_noop("%(episodes)s episodes and %(vectors)s vectors in %(scopes)s scopes checked"),
        episodes=report.episodes,
        vectors=report.vectors,
        scopes=report.scopes,
    )
    if report.errors:
        return Check("index_drift", ERROR, f"{counted}; errors: {'; '.join(report.errors[:3])}", REINDEX_FIX)
    if report.drift:
        fix = gettext_noop("Run `python manage.py reindex` (`--check` reports without changing anything).")
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
    return Check(
        "index_drift", OK, said(gettext_noop("the vector index matches the database (%(counted)s)"), counted=counted)
    )


AUDIT_KEY = "MEMCONSOLE_AUDIT_KEY"
ROW_FIX = (
    "These rows were changed in the database outside memconsole (or restored from another backup than the "
    "audit log). Do not run `reindex` or `rotate_keys` to repair them (both refuse such rows): compare them "
    "with your latest backup and each row's history in the audit log, then restore them from the backup or "
    "delete them in the console."
)


def _audit_key_label() -> str:
    if settings.MEMCONSOLE_AUDIT_KEY:
        return f"{AUDIT_KEY} is set to another key than the one the chain was written with"
    return (
        f"{AUDIT_KEY} is not set (the key is then derived from SECRET_KEY), but the chain was written with another key"
    )


def _key_problem(report: audit.ChainReport) -> Check | None:
    """A check saying which key is missing, when a chain that does not verify is a key problem, not tampering."""
    recorded = InstallState.recorded_audit_key()
    wrong_audit_key = bool(recorded) and recorded != audit.key_id()
    if not wrong_audit_key and not recorded and report.reason == "its fields were changed":
        # No fingerprint recorded (a chain older than it): every entry failing, first and last, is a key.
        first = AuditEntry.objects.order_by("id").first()
        last = AuditEntry.objects.order_by("-id").first()
        wrong_audit_key = all(
            entry is not None and entry.entry_hash != audit.entry_hash(entry) for entry in (first, last)
        )
    if wrong_audit_key:
        return Check(
            "audit_chain",
            ERROR,
            f"the audit chain cannot be verified: {_audit_key_label()} (this is a missing or wrong key, not a "
            "broken chain)",
            f"Set {AUDIT_KEY} to the key the chain was written with and restart; new entries appended meanwhile "
            "are signed with the wrong key.",
        )
    if report.reason.startswith("payload unreadable") and report.broken_seq is not None:
        entry = AuditEntry.objects.filter(chain=report.chain, seq=report.broken_seq).first()
        try:
            if entry is not None:
                _ = entry.payload
        except crypto.RowBindingError:
            return None  # a payload copied from another entry: tampering
        except crypto.DecryptionError:
            missing = "is not set" if not crypto.enabled() else "holds no key that opens them"
            return Check(
                "audit_chain",
                ERROR,
                f"the audit chain cannot be verified: its payloads are encrypted and {crypto.SETTING} {missing} "
                f"(first: entry #{report.broken_seq}; this is a missing key, not a broken chain)",
                f"Set {crypto.SETTING} to the key(s) the data was written with (newest first) and restart.",
            )
    return None


def check_audit_chain() -> Check:
    report = audit.verify_audit_chain()
    if report.ok:
        if report.checked:
            InstallState.note_audit_key(audit.key_id())  # the key every entry verified with
            checkpoints.take()  # anchors the heads just verified (nothing when none moved)
        chains = said(
            gettext_noop("%(n)s chain") if report.chains == 1 else gettext_noop("%(n)s chains"), n=report.chains
        )
        anchors = report.checkpoints
        checkpoints_said = said(
            gettext_noop("%(n)s checkpoint") if anchors == 1 else gettext_noop("%(n)s checkpoints"), n=anchors
        )
        verifies = gettext_noop(
            "the audit chain verifies: %(entries)s entries in %(chains)s, anchored by %(checkpoints)s"
        )
        return Check(
            "audit_chain", OK, said(verifies, entries=report.checked, chains=chains, checkpoints=checkpoints_said)
        )
    if key_check := _key_problem(report):
        return key_check
    what = (
        f"Entry #{report.broken_seq} of {checkpoints.chain_label(report.chain)}"
        if report.broken_seq is not None
        else "An audit checkpoint"
    )
    return Check(
        "audit_chain",
        ERROR,
        str(report),
        f"{what} was changed, inserted or deleted outside memconsole. Compare it with your latest backup to "
        "see what changed; the chain cannot be repaired in place, and new entries keep being appended after it.",
    )


def check_row_integrity() -> Check:
    report = tamper.check_rows()
    if not report.ok:
        return Check("row_integrity", ERROR, report.summary(), ROW_FIX)
    if not report.unrecorded and not report.unreadable:
        intact = gettext_noop(
            "%(episodes)s episodes and %(profiles)s profiles checked against the audit chain: "
            "none was changed outside memconsole"
        )
        return Check("row_integrity", OK, said(intact, episodes=report.episodes, profiles=report.profiles))
    detail = f"{report.summary()}: none was changed outside memconsole"
    if report.unrecorded:
        detail += (
            f"; {report.unrecorded} rows written before row binding have no recorded state yet (recorded at "
            "their next change, or now by `python manage.py rotate_keys`)"
        )
    if report.unreadable:
        detail += f"; {report.unreadable} rows could not be opened (see the encryption check)"
    return Check("row_integrity", OK, detail)


def check_encryption() -> Check:
    census = rotation.encryption_census()
    rows = sum(c.rows for c in census.values())
    encrypted = sum(c.encrypted for c in census.values())
    newest = sum(c.newest for c in census.values())
    older = sum(c.older for c in census.values())
    plain = sum(c.plain for c in census.values())
    unreadable = sum(c.unreadable for c in census.values())
    old_format = sum(c.old_format for c in census.values())
    if not crypto.enabled():
        if encrypted == 0:
            return Check(
                "encryption",
                OK,
                said(
                    gettext_noop("encryption at rest is off (%(setting)s is not set); no row is encrypted"),
                    setting=crypto.SETTING,
                ),
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
    if older or plain or old_format:
        parts = []
        if older:
            parts.append(f"{older} under an older key")
        if plain:
            parts.append(f"{plain} not encrypted (written before keys were set)")
        if old_format:
            parts.append(f"{old_format} sealed without their row identity (written before row binding)")
        return Check("encryption", WARN, f"{detail}; {', '.join(parts)}", "Run `python manage.py rotate_keys`.")
    if key_count > 1 and encrypted:
        detail += "; the older keys can be removed"
    return Check("encryption", OK, detail)
