from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from memconsole.memory.models import Episode


class Command(BaseCommand):
    help = "What `make run` does before serving: load demo data and create an admin account on the first start."

    def handle(self, *args: Any, **options: Any) -> None:
        marker = settings.VAR_DIR / "first-start-done"
        User = get_user_model()
        if not marker.exists() and not Episode.objects.exists():
            self.stdout.write("First start: loading demo data (about a minute)…")
            call_command("load_demo", stdout=self.stdout, stderr=self.stderr)
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "", password)
            self.stdout.write(
                self.style.SUCCESS(
                    "\nCreated the admin account. It is shown only this once:\n"
                    f"    username: admin\n    password: {password}\n"
                    "Change it after logging in (Django admin → Users), or reset it with "
                    "`.venv/bin/python manage.py changepassword admin`.\n"
                )
            )
        else:
            self.stdout.write(
                "Log in with the account created at the first start (reset with `manage.py changepassword`)."
            )
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        marker.touch()
