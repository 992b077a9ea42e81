from __future__ import annotations

from django.urls import path, register_converter

from memconsole.memory.validation import EPISODE_ID_CHARS

from .views import (
    audit,
    bulk,
    diagnostics,
    episodes,
    erasure,
    exports,
    imports,
    injection,
    profiles,
    scopes,
    tokens,
    users,
)


class EpisodeIdConverter:
    regex = EPISODE_ID_CHARS

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
    path("", scopes.overview, name="overview"),
    path("scopes/open/", scopes.scope_open, name="scope_open"),
    path("scopes/<int:scope_id>/", scopes.scope_home, name="scope"),
    path("scopes/<int:scope_id>/profiles/", profiles.profiles, name="profiles"),
    path("scopes/<int:scope_id>/profiles/<str:profile_type>/", profiles.profile_detail, name="profile_detail"),
    path("scopes/<int:scope_id>/profiles/<str:profile_type>/edit/", profiles.profile_edit, name="profile_edit"),
    path(
        "scopes/<int:scope_id>/profiles/<str:profile_type>/rollback/",
        profiles.profile_rollback,
        name="profile_rollback",
    ),
    path("scopes/<int:scope_id>/episodes/", episodes.episodes, name="episodes"),
    path("scopes/<int:scope_id>/episodes/bulk/", bulk.episodes_bulk, name="episodes_bulk"),
    path("scopes/<int:scope_id>/speakers/", episodes.speaker_options, name="speaker_options"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/", episodes.episode_detail, name="episode_detail"),
    path(
        "scopes/<int:scope_id>/episodes/<episode:episode_id>/archive/", episodes.episode_archive, name="episode_archive"
    ),
    path(
        "scopes/<int:scope_id>/episodes/<episode:episode_id>/restore/", episodes.episode_restore, name="episode_restore"
    ),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/delete/", episodes.episode_delete, name="episode_delete"),
    path("scopes/<int:scope_id>/injection/", injection.injection, name="injection"),
    path(
        "scopes/<int:scope_id>/injection/<snapshot:snapshot_id>/", injection.injection_detail, name="injection_detail"
    ),
    path("scopes/<int:scope_id>/audit/", audit.audit_log, name="audit"),
    path("scopes/<int:scope_id>/audit/export/", audit.audit_export, name="audit_export"),
    path("scopes/<int:scope_id>/export/", exports.export, name="export"),
    path("scopes/<int:scope_id>/export/download/", exports.export_download, name="export_download"),
    path("import/", imports.import_upload, name="import"),
    path("erasure/", erasure.erasure_form, name="erasure"),
    path("erasure/run/", erasure.erasure_run, name="erasure_run"),
    path("diagnostics/", diagnostics.diagnostics, name="diagnostics"),
    path("diagnostics/run/", diagnostics.diagnostics_run, name="diagnostics_run"),
    path("audit/", audit.audit_all, name="audit_all"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token_revoke"),
    path("users/", users.user_list, name="users"),
    path("users/<int:user_id>/", users.user_detail, name="user_detail"),
    path("users/<int:user_id>/role/", users.user_role, name="user_role"),
    path("users/<int:user_id>/grants/", users.user_grants, name="user_grants"),
    path("users/<int:user_id>/active/", users.user_active, name="user_active"),
]
