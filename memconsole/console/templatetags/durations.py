"""A length of time as people say it ("15 minutes"), in the language of the request."""

from __future__ import annotations

from datetime import timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timeuntil

register = template.Library()


@register.filter
def duration(value: timedelta | None) -> str:
    """ "15 minutes", "1 hour, 30 minutes" (Django's own translated units); "" for none."""
    if not value:
        return ""
    now = timezone.now()
    return timeuntil(now + value, now)
