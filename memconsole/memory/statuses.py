"""An episode's lifecycle statuses and their translated labels, apart from `models` so that code
below the models (`wording`, which `errors` uses) can name them too; `models` re-exports them."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Status(models.TextChoices):
    """An episode's lifecycle status; a stored value outside these reads as active (`effective_status`)."""

    ACTIVE = "active", _("Active")
    SUPERSEDED = "superseded", _("Superseded")
    ARCHIVED = "archived", _("Archived")
