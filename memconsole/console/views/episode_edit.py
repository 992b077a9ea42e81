"""Correcting memory by hand: edit an episode, reassign its speaker, add an episode."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from memconsole.memory import editing, people, queries, roles
from memconsole.memory.episodes import get_episode
from memconsole.memory.errors import Conflict
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import Episode, Scope
from memconsole.memory.scopes import ScopeKeys

from .. import timezones
from ..access import ConsoleRequest, scope_view
from ..diffs import FIELD_LABELS
from ..episode_forms import EpisodeForm, SpeakerForm
from ..screens import render_screen, scope_context, wants_fragment

CHAIN_LIMIT = 20  # as the detail view (episodes.py) shows them
HISTORY_LIMIT = 50


def _resolve_speaker(keys: ScopeKeys, form: Any, field: str, typed: str, *, new: bool = True) -> people.Person | None:
    """The person a typed name or id names in the scope; a form error when a name is shared by
    several ids (which one?). An unknown text is a new speaker id, as typed, where `new` allows it
    (else a form error: a typo must not make up a person)."""
    lookup = people.find_in_scope(keys, typed)
    if lookup.ambiguous:
        choices = ", ".join(person.label for person in lookup.choices)
        form.add_error(
            field,
            _("Several speakers are called “%(name)s”: type one of %(choices)s.") % {"name": typed, "choices": choices},
        )
        return None
    if lookup.person is None and not new:
        form.add_error(
            field,
            _(
                "No speaker is called “%(name)s” in this space. Pick one from the list, or tick “A new speaker” to use it as a new id."
            )
            % {"name": typed.strip()},
        )
        return None
    return lookup.person or people.Person(typed.strip())


def _detail_context(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode: Episode, **extra: Any
) -> dict[str, Any]:
    return scope_context(
        request,
        scope,
        keys,
        "episodes",
        episode=episode,
        newer=queries.newer_versions(keys, episode, CHAIN_LIMIT),
        replaces=queries.replaced_episodes(keys, episode, CHAIN_LIMIT),
        history=queries.episode_history(keys, episode.episode_id, HISTORY_LIMIT),
        people=people.scope_people(keys),
        speaker_form=SpeakerForm(initial={"version": episode.version}),
        **extra,
    )


def _saved(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode: Episode, message: str, inline: bool = False
) -> HttpResponse:
    """After a change: `inline` (an action on the detail page) answers htmx with the re-rendered
    detail and an event for the counters; otherwise to the episode's page (htmx follows there too)."""
    if inline and wants_fragment(request):
        context = _detail_context(request, scope, keys, episode, flash=message)
        response = render(request, "console/_episode_detail.html", context)
        return trigger_client_event(response, "episodeCountsChanged")
    messages.success(request, message)
    if wants_fragment(request):
        return HttpResponseClientRedirect(reverse("console:episode_detail", args=[scope.pk, episode.episode_id]))
    return redirect("console:episode_detail", scope_id=scope.pk, episode_id=episode.episode_id)


def _conflict_lines(keys: ScopeKeys, episode: Episode, read: int) -> list[dict[str, Any]]:
    """What the other edits since version `read` changed, field by field, oldest first."""
    return [
        {
            **change,
            "label": FIELD_LABELS.get(change["field"], change["field"]),
            "recorded": change["before"],  # as stored, for comparing with the posted form
            "before": _shown(change["before"], change["field"]),
            "after": _shown(change["after"], change["field"]),
        }
        for change in editing.changes_since(keys, episode.episode_id, read)
    ]


def _same(posted: str, recorded: Any) -> bool:
    """Whether a posted form value says what a recorded one did (tags compared as lists)."""
    if isinstance(recorded, str) and "," in recorded:
        return [t.strip() for t in posted.split(",") if t.strip()] == [t.strip() for t in recorded.split(",")]
    return posted.strip() == str(recorded if recorded is not None else "").strip()


def _same_time(posted: str, recorded: Any) -> bool:
    """Whether a posted event time (in the console's zone, to the minute) is a recorded one (ISO)."""
    try:
        typed = EpisodeForm.base_fields["timestamp"].clean(posted)
        stored = datetime.fromisoformat(str(recorded))
    except (forms.ValidationError, ValueError):
        return False
    return bool(typed) and typed == stored.replace(second=0, microsecond=0)


def _shown(value: Any, field: str) -> Any:
    """A recorded value as the form spells it (tags comma-separated, an event time in the console's zone)."""
    if field == "timestamp" and value:
        try:
            stamp = timezones.local(datetime.fromisoformat(str(value)))
        except ValueError:
            return value
        return timezones.spelled(stamp, " %H:%M ") + (stamp.tzname() or "")
    return ", ".join(str(item) for item in value) if isinstance(value, list) else value


def _edit_screen(
    request: ConsoleRequest,
    scope: Scope,
    keys: ScopeKeys,
    episode: Episode,
    form: EpisodeForm,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    context = scope_context(
        request, scope, keys, "episodes", episode=episode, form=form, people=people.scope_people(keys), **extra
    )
    return render_screen(request, "console/episode_edit.html", "console/_episode_form.html", context, status)


@require_http_methods(["GET", "POST"])
@scope_view(roles.OPERATE)
def episode_edit(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    episode = get_episode(keys, episode_id)
    if request.method == "GET":
        return _edit_screen(request, scope, keys, episode, EpisodeForm(initial=EpisodeForm.initial_from(episode)))
    form = EpisodeForm(request.POST)
    if form.is_valid():
        changes = form.changes(episode)
        if changes["sender_id"] != episode.sender_id:
            person = _resolve_speaker(keys, form, "sender_id", changes["sender_id"])
            if person is not None:
                changes["sender_id"] = person.sender_id
                if changes["sender_name"] == episode.sender_name:
                    changes["sender_name"] = person.name
    if form.is_valid() and not form.errors:
        read = form.cleaned_data["version"]
        try:
            edit = editing.edit_episode(keys, request.actor, episode.episode_id, if_version=read, **changes)
        except MemoryValidationError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.in_language())
        except Conflict as exc:
            return _conflict(request, scope, keys, episode, read or 0, exc.current_version)
        else:
            if not edit.changed:
                message = _("Nothing changed: episode %(id)s is as it was.") % {"id": episode.episode_id}
            else:
                message = _("Episode %(id)s saved (version %(version)d).") % {
                    "id": episode.episode_id,
                    "version": edit.episode.version,
                }
            return _saved(request, scope, keys, edit.episode, message)
    return _edit_screen(request, scope, keys, episode, form, 400)


def _conflict(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode: Episode, read: int, current: int
) -> HttpResponse:
    """409: someone saved the episode since this form was rendered. Their change is shown, and the
    admin's own edit stays in the form, now based on the current version ("save my edit again"): a
    field the admin left as it was takes their value, so saving again keeps their change there."""
    episode = get_episode(keys, episode.episode_id)
    lines = _conflict_lines(keys, episode, read)
    data = request.POST.copy()
    data["version"] = str(current)
    current_values = EpisodeForm.initial_from(episode)
    for line in lines:
        name = line["field"]
        if name == "timestamp":
            if _same_time(data.get(name, ""), line["recorded"]) and current_values[name]:
                data[name] = current_values[name].strftime("%Y-%m-%dT%H:%M")  # as the input spells it
        elif name in current_values and _same(data.get(name, ""), line["before"]):
            data[name] = str(current_values[name])
    form = EpisodeForm(data)
    form.is_valid()
    conflict = {"read": read, "current": current, "lines": lines}
    return _edit_screen(request, scope, keys, episode, form, 409, conflict=conflict)


@require_POST
@scope_view(roles.OPERATE)
def episode_reassign(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    """ "This is about Bob, not Alice": one action, one audit entry."""
    episode = get_episode(keys, episode_id)
    form = SpeakerForm(request.POST)
    person = (
        _resolve_speaker(keys, form, "speaker", form.cleaned_data["speaker"], new=form.cleaned_data["new_speaker"])
        if form.is_valid()
        else None
    )
    if person is None:
        context = _detail_context(request, scope, keys, episode)
        context["speaker_form"] = form
        return render_screen(request, "console/episode_detail.html", "console/_episode_detail.html", context, 400)
    try:
        edit = editing.reassign_speaker(
            keys, request.actor, episode.episode_id, person.sender_id, person.name, form.cleaned_data["version"]
        )
    except Conflict:
        context = _detail_context(request, scope, keys, get_episode(keys, episode_id))
        context["speaker_form"] = form
        form.add_error(
            None, _("Nothing was saved: someone else changed this episode meanwhile. Check it and try again.")
        )
        return render_screen(request, "console/episode_detail.html", "console/_episode_detail.html", context, 409)
    if edit.changed:
        message = _("Episode %(id)s is now about %(person)s.") % {"id": episode.episode_id, "person": person.label}
    else:
        message = _("Nothing changed: episode %(id)s was already about %(person)s.") % {
            "id": episode.episode_id,
            "person": person.label,
        }
    return _saved(request, scope, keys, edit.episode, message, inline=True)


@require_http_methods(["GET", "POST"])
@scope_view(roles.OPERATE)
def episode_add(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """Write an episode by hand (source `console`)."""
    form = EpisodeForm(request.POST if request.method == "POST" else None, initial={"importance": 2})
    status = 200
    if form.is_bound:
        status = 400
        person = None
        if form.is_valid() and form.cleaned_data["sender_id"]:
            person = _resolve_speaker(keys, form, "sender_id", form.cleaned_data["sender_id"])
        if form.is_valid() and not form.errors:
            data = form.changes()
            try:
                result = editing.add_episode(
                    keys,
                    request.actor,
                    data["content"],
                    tags=data["tags"],
                    importance=data["importance"],
                    kind=data["kind"],
                    sender_id=person.sender_id if person else "",
                    sender_name=data["sender_name"] or (person.name if person else ""),
                    timestamp=data.get("timestamp"),
                )
            except MemoryValidationError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.in_language())
            else:
                message = _("Episode %(id)s added.") % {"id": result.episode.episode_id}
                return _saved(request, scope, keys, result.episode, message)
    context = scope_context(request, scope, keys, "episodes", form=form, people=people.scope_people(keys), adding=True)
    return render_screen(request, "console/episode_edit.html", "console/_episode_form.html", context, status)
