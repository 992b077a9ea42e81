from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


class MemoryConfig(AppConfig):
    name = "memconsole.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # roles and checks import models (roles also django.contrib.auth's), which cannot be imported
        # while Django is still loading the app configs (this module); ready() is where Django's docs
        # connect such handlers and register such checks.
        from .checks import check_encryption_key  # noqa: PLC0415
        from .install import InstallState  # noqa: PLC0415
        from .lexical import connect as connect_lexical_index  # noqa: PLC0415
        from .roles import ensure_roles  # noqa: PLC0415
        from .rowstate import connect as connect_row_state  # noqa: PLC0415

        post_migrate.connect(ensure_roles, sender=self, dispatch_uid="memconsole-roles")
        # a migrate or a flush may have emptied InstallState: this process's cache must not outlive it
        post_migrate.connect(InstallState.forget_cache, sender=self, dispatch_uid="memconsole-install-state")
        checks.register(check_encryption_key)
        connect_lexical_index()  # the lexical index follows every Episode.save() (memory/lexical.py)
        connect_row_state()  # the next audit entry records every saved episode/profile (memory/rowstate.py)
