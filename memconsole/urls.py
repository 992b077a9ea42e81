from django.contrib import admin
from django.urls import include, path, re_path

from memconsole.api import probes
from memconsole.api import views as api_views

urlpatterns = [
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", include("memconsole.api.urls")),
    re_path(r"^api(/|$)", api_views.not_found),  # JSON 404 for every other /api path
    path("", include("memconsole.console.urls")),
]

# Errors raised outside any view (e.g. a disallowed Host) answer JSON under /api/, HTML elsewhere.
handler400 = "memconsole.api.views.bad_request"
handler500 = "memconsole.api.views.server_error"
