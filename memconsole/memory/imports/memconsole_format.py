"""The `memconsole` format: our own scope export (`exports.py`), profiles and episodes.

The audit envelope of another installation is not imported: this installation's chain records
the import instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.utils.translation import gettext_noop

from ..exports import AUDIT_FORMAT_MARKER, FORMAT_MARKER
from ..wording import said
from .botmemory_items import fact_in, message_in, records
from .langbot import check_version, episodes_envelope, profiles_envelope, session_of
from .plan import Plan, Target
from .readers import load_json
from .report import ImportFileError


def parse(path: Path, plan: Plan, target: Target, *, session_name: str | None = None, **_options: Any) -> None:
    """Read a memconsole export; `session_name` (if given) replaces the exported scope's session."""
    doc = load_json(path, "memconsole")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_MARKER:
        if isinstance(doc, dict) and doc.get("format") == AUDIT_FORMAT_MARKER:
            raise ImportFileError(
                said(gettext_noop("this is an audit log export; audit logs are not imported")), field="format"
            )
        if isinstance(doc, list):
            raise ImportFileError(
                said(gettext_noop("this is a bare list of episodes, not a memconsole export (use the langbot format)")),
                field="format",
            )
        if isinstance(doc, dict) and isinstance(doc.get("episodes"), list):
            raise ImportFileError(
                said(gettext_noop("this looks like a LangBot export, not a memconsole one (use the langbot format)")),
                field="format",
            )
        raise ImportFileError(
            said(gettext_noop("not a memconsole export: 'format' must be %(marker)s"), marker=repr(FORMAT_MARKER)),
            field="format",
        )
    if doc.get("format_version", 1) != 1 or isinstance(doc.get("format_version"), bool):
        raise ImportFileError(
            said(
                gettext_noop("format_version %(version)s is not understood"),
                version=f"{doc.get('format_version')!r:.20}",
            ),
            field="format_version",
        )
    scope = doc.get("scope")
    if not isinstance(scope, dict):
        scope = {}
    session = session_name or scope.get("session_name") or session_of(scope.get("scope_key"))
    for name in ("profiles", "episodes"):
        envelope = doc.get(name)
        if envelope is None:
            continue
        if not isinstance(envelope, dict):
            raise ImportFileError(said(gettext_noop("'%(name)s' must be an envelope object"), name=name), field=name)
        check_version(envelope, f"{name}: ")
        if name == "profiles":
            profiles_envelope(plan, envelope, "profiles.", lambda _scope_key: target(session, "profiles"))
        else:
            episodes_envelope(plan, envelope, "episodes.", lambda _scope_key: target(session, "episodes"))
    for index, item in enumerate(records(doc, "facts")):  # issue 20: keyed facts, then the window
        where = f"facts[{index}]"
        keys = target(session, where)
        plan.facts.append(
            fact_in(keys, where, item.get("subject"), item.get("key"), item.get("value"), item.get("updated_at"))
        )
    for index, item in enumerate(records(doc, "messages")):
        where = f"messages[{index}]"
        plan.messages.append(
            message_in(
                target(session, where),
                where,
                item.get("role"),
                item.get("content"),
                item.get("created_at"),
                plan.imported_at,
                item.get("sender_id"),
                item.get("sender_name"),
            )
        )
