"""The console's time zone: the one every time is shown in and every time filter is read in.

An admin's explicit choice is kept in the session; otherwise the browser's zone, which console.js
reports in a cookie; otherwise the server's (`TIME_ZONE`, UTC). Django's `timezone.activate` then
makes templates (`{% timestamp %}`) and forms (naive `datetime-local` input) use it.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import unquote

from django import forms
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_lazy as _

from memconsole.memory import validation

SESSION_KEY = "memconsole_time_zone"
BROWSER_COOKIE = "memconsole_browser_tz"
BROWSER = "browser"  # the choice "follow the browser"


@cache
def zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid_zone(name: Any) -> str | None:
    """The IANA zone name when it is one (e.g. "Europe/Paris", "UTC"), else None."""
    if isinstance(name, str) and name in zone_names():
        return name
    return None


def chosen_zone(request: HttpRequest) -> tuple[str | None, str]:
    """(zone name or None for the server's, where it came from: "chosen", "browser" or "server")."""
    session = getattr(request, "session", None)
    chosen = valid_zone(session.get(SESSION_KEY)) if session is not None else None
    if chosen:
        return chosen, "chosen"
    browser = valid_zone(unquote(request.COOKIES.get(BROWSER_COOKIE, "")))  # console.js encodes "/"
    if browser:
        return browser, "browser"
    return None, "server"


def datetime_input() -> forms.DateTimeInput:
    """A `datetime-local` input: its value is read (and shown) in the console's time zone."""
    return forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


def in_console_zone(message: Promise) -> str:
    """A label naming the console's time zone, worked out when shown (`_("From (%(zone)s)")`): the
    time filters read their input in that zone."""
    return lazy(lambda: str(message) % {"zone": timezone.get_current_timezone_name()}, str)()


class TimeZoneForm(forms.Form):
    zone = forms.CharField(
        label=_("Time zone"),
        max_length=64,
        widget=forms.TextInput(attrs={"list": "zone-list", "autocomplete": "off", "spellcheck": "false"}),
        help_text=_("An IANA name such as Europe/Paris or Asia/Shanghai, or “browser” to follow your browser."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")  # as `forms.ConsoleForm` (which imports this module)
        super().__init__(*args, **kwargs)

    def clean_zone(self) -> str:
        zone: str = self.cleaned_data["zone"].strip()
        if zone.casefold() == BROWSER:
            return BROWSER
        if not valid_zone(zone):
            raise forms.ValidationError(_("This is not a time zone name. Pick one from the list."))
        return zone


class ZonedDateTimeField(forms.DateTimeField):
    """A date and time typed in the console's zone, refused (not a 500) when it has no place in
    what memconsole stores (`validation.EARLIEST`..`LATEST` in UTC). A time the clocks show twice
    (the hour repeated when daylight saving time ends) reads as its first occurrence, as the time
    the console showed for a stored one does: Django refuses it, and an episode stored in that hour
    could not be saved at all. A time the clocks skip is still refused."""

    def to_python(self, value: Any) -> datetime | None:
        try:
            return super().to_python(value)
        except forms.ValidationError as exc:
            naive = (exc.params or {}).get("datetime") if exc.code == "ambiguous_timezone" else None
            if not isinstance(naive, datetime) or not repeated(naive, timezone.get_current_timezone()):
                raise
            return naive.replace(tzinfo=timezone.get_current_timezone(), fold=0)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is not None and not validation.in_time_range(value):
            raise forms.ValidationError(
                _("Enter a date and time from 0001-01-02 to 9999-12-30 (UTC)."), code="out_of_range"
            )


def repeated(naive: datetime, zone: Any) -> bool:
    """Whether the wall-clock time `naive` happens twice in `zone` (its two folds differ)."""
    first, second = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    exists = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive
    return exists and first.utcoffset() != second.utcoffset()


def same_wall_clock(one: datetime, other: datetime) -> bool:
    """Whether two times read the same in the console's zone (to the minute shown)."""
    return local(one).replace(tzinfo=None, second=0, microsecond=0) == local(other).replace(
        tzinfo=None, second=0, microsecond=0
    )


def local(value: datetime) -> datetime:
    """`value` in the console's zone; in UTC when the zone would carry it past the calendar's end
    (a time stored before memconsole kept a day's margin there)."""
    try:
        return timezone.localtime(value)
    except (OverflowError, ValueError):
        return value.astimezone(UTC)


def spelled(stamp: datetime, time_format: str) -> str:
    """`stamp` as "YYYY-MM-DD" + `time_format` (a strftime format for the rest, e.g. " %H:%M"):
    `%Y` leaves a year before 1000 unpadded, and the calendar's edge (year 1) is a time people store."""
    return f"{stamp.year:04d}" + stamp.strftime("-%m-%d" + time_format)
