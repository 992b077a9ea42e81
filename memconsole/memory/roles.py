"""Console roles as groups with permissions (docs/design.md §6), and per-bot grants."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)

VIEW = "memory.view_scope"
OPERATE = "memory.operate_memory"
DELETE = "memory.delete_memory"
EXPORT = "memory.export_memory"
IMPORT = "memory.import_memory"
TOKENS = "memory.manage_tokens"
USERS = "auth.change_user"  # the console's Users screen (admin role)

ROLE_PERMISSIONS = {
    VIEWER: [VIEW],
    OPERATOR: [VIEW, OPERATE],
    ADMIN: [
        VIEW,
        OPERATE,
        DELETE,
        EXPORT,
        IMPORT,
        TOKENS,
        "memory.view_bottoken",
        "memory.change_bottoken",
        "memory.delete_bottoken",
        "memory.view_botgrant",
        "memory.add_botgrant",
        "memory.change_botgrant",
        "memory.delete_botgrant",
        "auth.view_user",
        "auth.add_user",
        "auth.change_user",
        "auth.delete_user",
        "auth.view_group",
    ],
}


def ensure_roles(**_: Any) -> None:
    """Create or refresh the role groups (runs after every migrate)."""
    for role, names in ROLE_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=role)
        perms = []
        for name in names:
            app_label, codename = name.split(".")
            perm = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if perm is not None:
                perms.append(perm)
        group.permissions.set(perms)


def allowed_bots(user: Any) -> frozenset[str] | None:
    """The bot_uuids a console user is limited to, or None for every bot."""
    if user.is_superuser:
        return None
    grants = frozenset(user.bot_grants.values_list("bot_uuid", flat=True))
    return grants or None
