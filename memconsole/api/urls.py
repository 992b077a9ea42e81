from __future__ import annotations

from django.urls import URLPattern, path, re_path

from . import views
from .site import api


def _endpoints() -> list[URLPattern]:
    """ninja's endpoint URLs, each answering a wrong method with the JSON 405 (views.json_errors).

    ninja's root URL is left out: it raises Http404 (an HTML page), and `not_found` answers there.
    """
    return [
        path(str(pattern.pattern), views.json_errors(pattern.callback), name=pattern.name)
        for pattern in api.urls[0]
        if isinstance(pattern, URLPattern) and pattern.name != "api-root"
    ]


app_name = "api"
urlpatterns = [
    *_endpoints(),
    path("openapi.json", views.openapi_document, name="openapi"),
    path("docs", views.docs, name="docs"),
    re_path(r"^.*$", views.not_found, name="not_found"),
]
