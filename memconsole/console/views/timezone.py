"""The Time zone page: the one zone every console time is shown and filtered in."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from ..access import ConsoleRequest, console_view
from ..screens import next_url, render_screen
from ..timezones import BROWSER, SESSION_KEY, TimeZoneForm, chosen_zone, zone_names


@require_http_methods(["GET", "POST"])
@console_view()
def time_zone(request: ConsoleRequest) -> HttpResponse:
    """Show or choose the zone; "browser" goes back to following the browser's."""
    back = next_url(request, reverse("console:overview"))
    zone, source = chosen_zone(request)
    form = TimeZoneForm(request.POST or None, initial={"zone": zone if source == "chosen" else BROWSER})
    if form.is_bound and form.is_valid():
        chosen = form.cleaned_data["zone"]
        if chosen == BROWSER:
            request.session.pop(SESSION_KEY, None)
            messages.success(request, _("Times now follow your browser’s time zone."))
        else:
            request.session[SESSION_KEY] = chosen
            messages.success(request, _("Times are now shown in %(zone)s.") % {"zone": chosen})
        return redirect(back)
    context = {"form": form, "zones": sorted(zone_names()), "source": source, "next": back}
    status = 400 if form.is_bound else 200
    return render_screen(request, "console/time_zone.html", "console/_time_zone.html", context, status)
