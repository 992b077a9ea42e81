from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from memconsole.memory import modelswitch
from memconsole.memory.errors import Unavailable
from memconsole.memory.models import Episode

TERMINAL = Path("/dev/tty")
SET_PASSWORD = ".venv/bin/python manage.py changepassword admin"


def open_terminal() -> TextIO | None:
    """The controlling terminal of whoever ran `make run`, or None (a container, a service, CI).

    Not stdout: a log collector or `make run | tee` captures stdout, and the password must never
    land in a log file."""
    try:
        return TERMINAL.open("w", encoding="utf-8")
    except OSError:
        return None


class Command(BaseCommand):
    help = "What `make run` does before serving: load demo data and create an admin account on the first start."

    def handle(self, *args: Any, **options: Any) -> None:
        marker = settings.VAR_DIR / "first-start-done"
        User = get_user_model()
        if not marker.exists() and not Episode.objects.exists():
            self.stdout.write("First start: loading demo data (about a minute)…")
            call_command("load_demo", stdout=self.stdout, stderr=self.stderr)
        if not User.objects.exists():
            self._create_admin(User)
        else:
            self.stdout.write(f"Log in with the account created at the first start (reset with `{SET_PASSWORD}`).")
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        marker.touch()
        self._model_switch()

    def _model_switch(self) -> None:
        """A changed embedding model is detected (and recorded) here; the server re-embeds in the
        background on its first request while recall answers from the index it has."""
        try:
            state = modelswitch.current()
        except Unavailable as exc:
            self.stdout.write(self.style.WARNING(f"The embedding model cannot be loaded: {exc}"))
            return
        if state.switching:
            self.stdout.write(
                self.style.WARNING(
                    f"The embedding model changed ({state.serving_model_id or 'none'} -> {state.model_id}): the "
                    f"server re-embeds the memory in the background ({state.percent}% done) and recall answers "
                    "from the current index meanwhile; /readyz and the console show the progress."
                )
            )

    def _create_admin(self, User: Any) -> None:
        """The admin account, its password shown on the terminal only; with no terminal it has none
        yet and the output says how to set one."""
        terminal = open_terminal()
        if terminal is None:
            admin = User.objects.create_superuser("admin", "", None)  # an unusable password
            self.stdout.write(
                self.style.WARNING(
                    f"\nCreated the admin account ({admin.get_username()}) with no password yet: there is no "
                    f"terminal to show one on, and it must never go to a log. Set it with `{SET_PASSWORD}`.\n"
                )
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        with terminal:
            terminal.write(
                "\nCreated the admin account. It is shown only this once, on this terminal:\n"
                f"    username: admin\n    password: {password}\n"
                f"Change it after logging in (Change password, top right), or with `{SET_PASSWORD}`.\n\n"
            )
        self.stdout.write(self.style.SUCCESS("Created the admin account; its password is shown on the terminal only."))
