"""Memory health as charts (issue 18): per memory space (its Health tab) and per bot, each with the
numbers behind the charts as CSV. Drawn on the server as SVG; no JavaScript."""

from __future__ import annotations

import csv
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET

from memconsole.memory import insights, queries
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from ..access import ConsoleRequest, console_view, scope_view
from ..charts import BarChart, bar_chart
from ..screens import bad_request, render_screen, scope_context


def _charts(figures: insights.Insights) -> list[BarChart]:
    labels = [day.day.isoformat() for day in figures.days]  # 2026-11-08: never 11/08 or 08/11

    def series(column: str) -> list[float]:
        return [float(getattr(day, column)) for day in figures.days]

    return [
        bar_chart(_("Injections per day"), labels, series("injections")),
        bar_chart(
            _("Share of injections with no memory"),
            labels,
            [day.share_without_memory for day in figures.days],
            percent=True,
        ),
        bar_chart(_("Characters injected per day"), labels, series("chars_injected")),
        bar_chart(_("Memories stored per day"), labels, series("stored")),
        bar_chart(_("Memories archived per day"), labels, series("archived")),
        bar_chart(_("Memories superseded per day"), labels, series("superseded")),
    ]


def _period(days: int) -> dict[str, object]:
    options = sorted({7, 30, 90, 365, days})
    labels = [(n, ngettext("%(n)d day", "%(n)d days", n) % {"n": n}) for n in options]
    return {"days": days, "day_options": labels}


def _csv(figures: insights.Insights, filename: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(insights.CSV_COLUMNS)
    for day in figures.days:
        writer.writerow(day.row())
    return response


@require_GET
@scope_view()
def scope_insights(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    days = insights.validate_days(request.GET.get("days"))
    figures = insights.for_space(keys, request.actor, days)
    context = scope_context(request, scope, keys, "insights", figures=figures, charts=_charts(figures), **_period(days))
    return render_screen(request, "console/insights.html", "console/_insights.html", context)


@require_GET
@scope_view()
def scope_insights_csv(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    figures = insights.for_space(keys, request.actor, insights.validate_days(request.GET.get("days")))
    return _csv(figures, f"memory-health-space-{scope.pk}.csv")


def _bot_figures(request: ConsoleRequest, bot_uuid: str) -> insights.Insights:
    """The figures of the bot named by `?bot=` (any text: bot ids may hold slashes)."""
    if not bot_uuid or not request.actor.may_use_bot(bot_uuid) or not queries.bot_sessions([bot_uuid], 1):
        raise Http404("No such bot.")  # a bot outside the user's grants is never confirmed
    return insights.for_bot(bot_uuid, request.actor, insights.validate_days(request.GET.get("days")))


@require_GET
@console_view()
def bot_insights(request: ConsoleRequest) -> HttpResponse:
    bot_uuid = request.GET.get("bot", "")
    if not bot_uuid:
        return bad_request(request, _("Name the bot: ?bot=<bot uuid>."))
    figures = _bot_figures(request, bot_uuid)
    days = insights.validate_days(request.GET.get("days"))
    csv_url = reverse("console:bot_insights_csv") + "?" + urlencode({"bot": bot_uuid})
    context = {
        "figures": figures,
        "charts": _charts(figures),
        "bot_uuid": bot_uuid,
        "csv_url": csv_url,
        **_period(days),
    }
    return render_screen(request, "console/bot_insights.html", "console/_insights.html", context)


@require_GET
@console_view()
def bot_insights_csv(request: ConsoleRequest) -> HttpResponse:
    bot_uuid = request.GET.get("bot", "")
    if not bot_uuid:
        return bad_request(request, _("Name the bot: ?bot=<bot uuid>."))
    return _csv(_bot_figures(request, bot_uuid), "memory-health-bot.csv")
