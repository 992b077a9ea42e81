from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from memconsole.api import probes
from memconsole.api import views as api_views
from memconsole.console.views import account as account_views
from memconsole.mcp import views as mcp_views
from memconsole.observability import views as observability_views

urlpatterns = [
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", observability_views.metrics, name="metrics"),  # Prometheus; token or allow-list
    path("admin/", admin.site.urls),
    # Login, logout and changing one's own password; no anonymous password-reset pages (no mail here).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", account_views.password_change, name="password_change"),
    path("accounts/password_change/done/", account_views.password_change_done, name="password_change_done"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("mcp", mcp_views.endpoint, name="mcp"),  # the MCP server (Streamable HTTP), bot tokens
    path("mcp/", mcp_views.endpoint),  # as a client may spell it (not the console's HTML 404)
    path("api/v1/", include("memconsole.api.urls")),
    re_path(r"^api(/|$)", api_views.not_found),  # JSON 404 for every other /api path
    path("", include("memconsole.console.urls")),
]

# Errors raised outside any view (e.g. a disallowed Host) answer JSON under /api/, HTML elsewhere.
handler400 = "memconsole.api.views.bad_request"
handler500 = "memconsole.api.views.server_error"
