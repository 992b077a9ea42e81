"""The API's plain Django views: the OpenAPI document and its docs page, and JSON answers for
everything that reaches /api/ outside an endpoint (unknown paths, wrong methods, errors raised
before any view)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from . import site
from .errors import error_response, json_response


def _methods(*methods: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Answer other methods with a JSON 405 (Allow lists these), and mark every answer no-store."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                return method_not_allowed(methods)
            response = view(request, *args, **kwargs)
            response["Cache-Control"] = "no-store"
            return response

        return wrapper

    return decorator


def method_not_allowed(methods: tuple[str, ...] | list[str]) -> JsonResponse:
    return error_response(
        405, "method_not_allowed", f"use {' or '.join(methods)}", headers={"Allow": ", ".join(methods)}
    )


def json_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap a ninja path view: its 405 becomes the JSON error (Allow sorted), every answer no-store."""

    @csrf_exempt
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if response.status_code == 405 and not response["Content-Type"].startswith("application/json"):
            return method_not_allowed(sorted(method.strip() for method in response["Allow"].split(",")))
        response["Cache-Control"] = "no-store"
        return response

    return wrapper


@_methods("GET")
def openapi_document(request: HttpRequest) -> JsonResponse:
    return json_response(site.document())


@_methods("GET")
def docs(request: HttpRequest) -> HttpResponse:
    """Swagger UI for the document, from local static files (the console's CSP allows no CDN)."""
    return site.api.docs.render_page(request, site.api)


@_methods("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Every other path under /api/: a JSON 404, never Django's HTML page."""
    return error_response(404, "not_found", f"no API endpoint at {request.path[:200]}")


def _is_api(request: HttpRequest) -> bool:
    """A request of the bot-facing faces (the JSON API and the MCP endpoint), which answer JSON."""
    path = request.path_info
    return path in ("/api", "/mcp") or path.startswith(("/api/", "/mcp/"))


def bad_request(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    """handler400: errors raised before any view (a disallowed Host, too many fields) stay JSON under /api/."""
    if _is_api(request):
        return error_response(400, "bad_request", "bad request")
    return defaults.bad_request(request, exception, **kwargs)


def server_error(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    """handler500: the API answers its own errors; this covers failures outside its views."""
    if _is_api(request):
        return error_response(500, "internal_error", "unexpected server error")
    return defaults.server_error(request, **kwargs)
