from __future__ import annotations

from django.urls import path, register_converter

from . import views


class EpisodeIdConverter:
    regex = "[0-9a-f]{12}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class SnapshotIdConverter(EpisodeIdConverter):
    regex = "[0-9a-f]{32}"


register_converter(EpisodeIdConverter, "episode")
register_converter(SnapshotIdConverter, "snapshot")

app_name = "console"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("scopes/open/", views.scope_open, name="scope_open"),
    path("scopes/<int:scope_id>/", views.scope_home, name="scope"),
    path("scopes/<int:scope_id>/profiles/", views.profiles, name="profiles"),
    path("scopes/<int:scope_id>/profiles/<str:profile_type>/", views.profile_detail, name="profile_detail"),
    path("scopes/<int:scope_id>/profiles/<str:profile_type>/edit/", views.profile_edit, name="profile_edit"),
    path(
        "scopes/<int:scope_id>/profiles/<str:profile_type>/rollback/", views.profile_rollback, name="profile_rollback"
    ),
    path("scopes/<int:scope_id>/episodes/", views.episodes, name="episodes"),
    path("scopes/<int:scope_id>/episodes/bulk/", views.episodes_bulk, name="episodes_bulk"),
    path("scopes/<int:scope_id>/speakers/", views.speaker_options, name="speaker_options"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/", views.episode_detail, name="episode_detail"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/archive/", views.episode_archive, name="episode_archive"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/restore/", views.episode_restore, name="episode_restore"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/delete/", views.episode_delete, name="episode_delete"),
    path("scopes/<int:scope_id>/injection/", views.injection, name="injection"),
    path("scopes/<int:scope_id>/injection/<snapshot:snapshot_id>/", views.injection_detail, name="injection_detail"),
    path("scopes/<int:scope_id>/audit/", views.audit_log, name="audit"),
    path("scopes/<int:scope_id>/audit/export/", views.audit_export, name="audit_export"),
    path("scopes/<int:scope_id>/export/", views.export, name="export"),
    path("scopes/<int:scope_id>/export/download/", views.export_download, name="export_download"),
    path("import/", views.import_upload, name="import"),
    path("erasure/", views.erasure_form, name="erasure"),
    path("erasure/run/", views.erasure_run, name="erasure_run"),
    path("diagnostics/", views.diagnostics, name="diagnostics"),
    path("diagnostics/run/", views.diagnostics_run, name="diagnostics_run"),
]
