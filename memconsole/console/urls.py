from __future__ import annotations

from django.urls import path, register_converter

from memconsole.memory.validation import EPISODE_ID_CHARS

from .views import (
    audit,
    bulk,
    diagnostics,
    episode_edit,
    episodes,
    erasure,
    explain,
    exports,
    imports,
    injection,
    insights,
    jobs,
    profiles,
    scopes,
    timetravel,
    timezone,
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
    path("scopes/new/episode/", scopes.space_first_episode, name="space_first_episode"),
    path("scopes/<int:scope_id>/remove/", scopes.scope_remove, name="scope_remove"),
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
    path("scopes/<int:scope_id>/episodes/new/", episode_edit.episode_add, name="episode_add"),
    path("scopes/<int:scope_id>/episodes/<episode:episode_id>/edit/", episode_edit.episode_edit, name="episode_edit"),
    path(
        "scopes/<int:scope_id>/episodes/<episode:episode_id>/speaker/",
        episode_edit.episode_reassign,
        name="episode_reassign",
    ),
    path("scopes/<int:scope_id>/injection/", injection.injection, name="injection"),
    path(
        "scopes/<int:scope_id>/injection/<snapshot:snapshot_id>/", injection.injection_detail, name="injection_detail"
    ),
    path("scopes/<int:scope_id>/insights/", insights.scope_insights, name="insights"),
    path("scopes/<int:scope_id>/known-at/", timetravel.known_at, name="known_at"),
    path("scopes/<int:scope_id>/insights.csv", insights.scope_insights_csv, name="insights_csv"),
    path("bots/insights/", insights.bot_insights, name="bot_insights"),
    path("bots/insights.csv", insights.bot_insights_csv, name="bot_insights_csv"),
    path(
        "scopes/<int:scope_id>/injection/<snapshot:snapshot_id>/replay/",
        explain.snapshot_replay,
        name="snapshot_replay",
    ),
    path("scopes/<int:scope_id>/injection/<snapshot:snapshot_id>/fix/", explain.snapshot_fix, name="snapshot_fix"),
    path("scopes/<int:scope_id>/audit/", audit.audit_log, name="audit"),
    path("scopes/<int:scope_id>/audit/export/", audit.audit_export, name="audit_export"),
    path("scopes/<int:scope_id>/export/", exports.export, name="export"),
    path("scopes/<int:scope_id>/export/download/", exports.export_download, name="export_download"),
    path("import/", imports.import_upload, name="import"),
    path("erasure/", erasure.erasure_form, name="erasure"),
    path("erasure/run/", erasure.erasure_run, name="erasure_run"),
    path("timezone/", timezone.time_zone, name="time_zone"),
    path("diagnostics/", diagnostics.diagnostics, name="diagnostics"),
    path("diagnostics/run/", diagnostics.diagnostics_run, name="diagnostics_run"),
    path("diagnostics/reindex/", diagnostics.diagnostics_reindex, name="diagnostics_reindex"),
    path("diagnostics/rotate-keys/", diagnostics.diagnostics_rotate, name="diagnostics_rotate"),
    path("diagnostics/reembed/", diagnostics.diagnostics_reembed, name="diagnostics_reembed"),
    path("jobs/<uuid:job_id>/", jobs.job_detail, name="job"),
    path("audit/", audit.audit_all, name="audit_all"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token_revoke"),
    path("users/", users.user_list, name="users"),
    path("users/<int:user_id>/", users.user_detail, name="user_detail"),
    path("users/<int:user_id>/role/", users.user_role, name="user_role"),
    path("users/<int:user_id>/grants/", users.user_grants, name="user_grants"),
    path("users/<int:user_id>/active/", users.user_active, name="user_active"),
    path("users/<int:user_id>/unlock/", users.user_unlock, name="user_unlock"),
]
