from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryConfig(AppConfig):
    name = "memconsole.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # roles imports django.contrib.auth's models, which cannot be imported while Django is still
        # loading the app configs (this module); ready() is where Django's docs connect such handlers.
        from .roles import ensure_roles  # noqa: PLC0415

        post_migrate.connect(ensure_roles, sender=self, dispatch_uid="memconsole-roles")
