from django.contrib import admin
from django.urls import include, path

from memconsole.api import probes

urlpatterns = [
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", include("memconsole.api.urls")),
    path("", include("memconsole.console.urls")),
]
