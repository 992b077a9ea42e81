from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "memconsole.jobs"
    label = "jobs"
    verbose_name = "Background jobs"

    def ready(self) -> None:
        # django-tasks-db registers its task table in the Django admin; the console's job pages are
        # the interface to jobs, and the admin would be one more set of URLs to guard.
        from django.contrib import admin  # noqa: PLC0415  (the admin has loaded every admin module by now)
        from django_tasks_db.models import DBTaskResult  # noqa: PLC0415

        if admin.site.is_registered(DBTaskResult):
            admin.site.unregister(DBTaskResult)
