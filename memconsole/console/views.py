from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@require_GET
@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return HttpResponse("memconsole")
