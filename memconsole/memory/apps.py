from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryConfig(AppConfig):
    name = "memconsole.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from .roles import ensure_roles

        post_migrate.connect(ensure_roles, sender=self, dispatch_uid="memconsole-roles")
