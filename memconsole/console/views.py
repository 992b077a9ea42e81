"""The browser console: one small view per screen, each answering a full page or, for htmx, the
fragment that the page includes. Views call `memconsole.memory`; they never touch the vector
index or the ciphers themselves."""

from __future__ import annotations

import difflib
import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import BadRequest, PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from memconsole.lib.vectors import VectorIndexError
from memconsole.memory import audit, erasure, exports, health, imports, roles
from memconsole.memory import operations as ops
from memconsole.memory.errors import NotFound
from memconsole.memory.errors import PermissionDenied as MemoryPermissionDenied
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import (
    PROFILE_SESSION,
    PROFILE_SPEAKER,
    STATUS_ACTIVE,
    STATUS_ARCHIVED,
    STATUSES,
    AuditEntry,
    Episode,
    EpisodeCounts,
    HealthRun,
    InjectionSnapshot,
    Profile,
    Scope,
)
from memconsole.memory.paging import keyset_page
from memconsole.memory.scopes import ScopeKeys, register_scope

from . import forms
from .access import (
    actor_for,
    console_view,
    may_use_bot,
    render_screen,
    require_perm,
    scope_view,
    user_permissions,
    visible_scopes,
    wants_fragment,
)
from .rows import episode_row, episode_table

SCOPES_PER_PAGE = 25
SNAPSHOTS_PER_PAGE = 20
AUDIT_PER_PAGE = 25
VERSIONS_PER_PAGE = 20
SPEAKERS_PER_PAGE = 50
HEALTH_HISTORY = 20
SPEAKER_SAMPLE = 500
CHAIN_LIMIT = 20
DEFAULT_TOP_K = 10
DEFAULT_PAGE_SIZE = 25


# --- helpers ------------------------------------------------------------------------------------


def _next_url(request: HttpRequest, default: str) -> str:
    """The `next` field of a posted form when it points back into this site, else `default`."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(candidate, {request.get_host()}, request.is_secure()):
        return candidate
    return default


def _scope_from_query(request: HttpRequest) -> Scope | None:
    """The visible scope named by `?scope=<id>`; None when absent, not a plain id, or not visible."""
    value = request.GET.get("scope", "")
    # Not isdigit()/int(): "²" is a digit that int() refuses, and thousands of digits are slow.
    if not re.fullmatch(r"[0-9]{1,18}", value):
        return None
    return visible_scopes(request.user).filter(pk=int(value)).first()


def _counts(keys: ScopeKeys) -> EpisodeCounts:
    return EpisodeCounts.objects.filter(user_key=keys.user_key).first() or EpisodeCounts(user_key=keys.user_key)


def _scope_context(request: HttpRequest, scope: Scope, keys: ScopeKeys, tab: str, **extra: Any) -> dict[str, Any]:
    return {
        "scope": scope,
        "keys": keys,
        "tab": tab,
        "counts": _counts(keys),
        **user_permissions(request.user),
        **extra,
    }


def _bad_request(request: HttpRequest, message: str, status: int = 400) -> HttpResponse:
    return render_screen(request, "console/bad_request.html", "console/_bad_request.html", {"message": message}, status)


def _known_speakers(keys: ScopeKeys) -> list[tuple[str, str]]:
    """Speakers for the picker: those with a profile and those behind the latest episodes.

    Bounded on purpose (the newest SPEAKER_SAMPLE episodes), so a scope of millions costs the same.
    """
    speakers: dict[str, str] = {}
    recent = (
        Episode.objects.filter(user_key=keys.user_key)
        .order_by("-id")
        .values_list("sender_id", "sender_name")[:SPEAKER_SAMPLE]
    )
    for sender_id, sender_name in recent:
        if sender_id and sender_id not in speakers:
            speakers[sender_id] = sender_name
    profiled = Profile.objects.filter(scope_key=keys.scope_key, type=PROFILE_SPEAKER).values_list(
        "sender_id", flat=True
    )
    for sender_id in profiled[:SPEAKER_SAMPLE]:
        speakers.setdefault(sender_id, "")
    return sorted(speakers.items())


# --- overview -----------------------------------------------------------------------------------


def _scope_page(request: HttpRequest, search: forms.ScopeSearchForm) -> Any:
    rows = visible_scopes(request.user)
    q = search.cleaned_data.get("q", "").strip()
    if q:
        rows = rows.filter(Q(session_name__icontains=q) | Q(bot_uuid__icontains=q) | Q(scope_key__icontains=q))
    page = keyset_page(rows, "id", search.cleaned_data.get("cursor"), SCOPES_PER_PAGE)
    counts = EpisodeCounts.objects.in_bulk({scope.user_key for scope in page.items}, field_name="user_key")
    for scope in page.items:
        scope.counts = counts.get(scope.user_key) or EpisodeCounts(user_key=scope.user_key)
    return page


def _derived(request: HttpRequest, derive: forms.DeriveForm) -> dict[str, Any] | None:
    keys = derive.cleaned_data["keys"]
    if not may_use_bot(request.user, keys.bot_uuid):
        derive.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None
    scope = Scope.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation).first()
    counts = EpisodeCounts.objects.filter(user_key=keys.user_key).first()
    return {"keys": keys, "scope": scope, "counts": counts}


@require_GET
@console_view
def overview(request: HttpRequest) -> HttpResponse:
    require_perm(request.user, roles.VIEW)
    search = forms.ScopeSearchForm(request.GET)
    derive = forms.DeriveForm(request.GET if "session_name" in request.GET else None)
    status = 200
    page = _scope_page(request, search) if search.is_valid() else None
    derived = _derived(request, derive) if derive.is_valid() else None
    if not search.is_valid() or (derive.is_bound and derived is None):
        status = 400
    context = {"search": search, "derive": derive, "page": page, "derived": derived, **user_permissions(request.user)}
    fragment = (
        "console/_derive.html"
        if getattr(request.htmx, "target", None) == "derive-result"
        else "console/_scope_list.html"
    )
    return render_screen(request, "console/overview.html", fragment, context, status)


@require_POST
@console_view
def scope_open(request: HttpRequest) -> HttpResponse:
    """Open a derived space: register it (audited) when it was never seen, then go to its episodes."""
    require_perm(request.user, roles.VIEW)
    derive = forms.DeriveForm(request.POST)
    if not derive.is_valid():
        context = {"search": forms.ScopeSearchForm(), "derive": derive, "page": None, "derived": None}
        context.update(user_permissions(request.user))
        return render_screen(request, "console/overview.html", "console/_derive.html", context, 400)
    keys = derive.cleaned_data["keys"]
    if not may_use_bot(request.user, keys.bot_uuid):
        raise Http404("No such memory space.")
    scope = Scope.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation).first()
    if scope is None:
        require_perm(request.user, roles.OPERATE)
        with transaction.atomic():
            scope = register_scope(keys)
            audit.append(
                "scope_open",
                actor_for(request),
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                target_type="scope",
                target_id=str(scope.pk),
                summary="memory space opened in the console",
                after={"bot_uuid": keys.bot_uuid, "session_name": keys.session_name, "isolation": keys.isolation},
            )
    return redirect("console:episodes", scope_id=scope.pk)


@require_GET
@scope_view()
def scope_home(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    return redirect("console:episodes", scope_id=scope.pk)


# --- episodes -----------------------------------------------------------------------------------


def _episode_results(request: HttpRequest, keys: ScopeKeys, form: forms.EpisodeFilterForm) -> tuple[dict, int]:
    data = form.cleaned_data
    try:
        if form.searching:
            hits = ops.recall(
                keys,
                data["q"],
                top_k=data.get("top_k") or DEFAULT_TOP_K,
                statuses=form.statuses() or list(STATUSES),
                tags=[data["tag"]] if data.get("tag") else None,
                actor=actor_for(request),
                **form.filters(),
            )
            return {"hits": hits}, 200
        page = ops.list_episodes(
            keys,
            cursor=data.get("cursor") or None,
            limit=data.get("limit") or DEFAULT_PAGE_SIZE,
            statuses=form.statuses(),
            tag=data.get("tag") or None,
            **form.filters(),
        )
        return {"page": page}, 200
    except MemoryValidationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return {}, 400
    except VectorIndexError as exc:
        return {"index_error": str(exc)}, 503


def _filters_cache_key(request: HttpRequest, scope: Scope, form: forms.EpisodeFilterForm) -> str | None:
    """What the rendered filter form depends on: the scope, the language and the query without its
    cursor (so every page of one listing shares it). None when the form shows errors: not cached."""
    if form.errors:
        return None
    query = request.GET.copy()
    query.pop("cursor", None)
    return f"{scope.pk}|{get_language()}|{query.urlencode()}"


@require_GET
@scope_view()
def episodes(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    query = request.GET.copy()
    # So that the page-size and number-of-results fields show what is used.
    query.setdefault("limit", str(DEFAULT_PAGE_SIZE))
    query.setdefault("top_k", str(DEFAULT_TOP_K))
    form = forms.EpisodeFilterForm(query)
    results, status = _episode_results(request, keys, form) if form.is_valid() else ({}, 400)
    context = _scope_context(request, scope, keys, "episodes", form=form, bulk=forms.BulkActionForm(), **results)
    page = results.get("page")
    context.update(episode_table(scope.pk, context, page.episodes if page else (), results.get("hits") or ()))
    context["filters_cache_key"] = _filters_cache_key(request, scope, form)
    return render_screen(request, "console/episode_list.html", "console/_episode_list.html", context, status)


@require_GET
@scope_view()
def speaker_options(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The speaker picker's <option>s, fetched when the picker is first focused rather than with
    every Episodes page (hundreds of speakers would cost the page more than its 25 rows)."""
    return render(request, "console/_speaker_options.html", {"speakers": _known_speakers(keys)})


def _episode_or_404(keys: ScopeKeys, episode_id: str) -> Episode:
    try:
        return ops.get_episode(keys, episode_id)
    except NotFound:
        raise Http404("No such episode in this memory space.") from None


@require_GET
@scope_view()
def episode_detail(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    episode = _episode_or_404(keys, episode_id)
    newer: list[Episode] = []
    current = episode
    while current.superseded_by and len(newer) < CHAIN_LIMIT:
        current = Episode.objects.filter(user_key=keys.user_key, episode_id=current.superseded_by).first()
        if current is None or current in newer:
            break
        newer.append(current)
    replaces = list(
        Episode.objects.filter(user_key=keys.user_key, superseded_by=episode.episode_id).order_by("-id")[:CHAIN_LIMIT]
    )
    history = list(
        AuditEntry.objects.filter(user_key=keys.user_key, target_type="episode", target_id=episode.episode_id).order_by(
            "-seq"
        )[:50]
    )
    context = _scope_context(
        request, scope, keys, "episodes", episode=episode, newer=newer, replaces=replaces, history=history
    )
    return render_screen(request, "console/episode_detail.html", "console/_episode_detail.html", context)


def _row_response(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode: Episode, message: str) -> HttpResponse:
    episodes_url = reverse("console:episodes", args=[scope.pk])
    if wants_fragment(request):
        response = HttpResponse(episode_row(scope.pk, user_permissions(request.user), episode, flash=message))
        return trigger_client_event(response, "episodeCountsChanged")
    messages.success(request, message)
    return redirect(_next_url(request, episodes_url))


def _change_status(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode_id: str, archive: bool) -> HttpResponse:
    episode = _episode_or_404(keys, episode_id)
    operation = ops.archive if archive else ops.restore
    try:
        operation(keys, actor_for(request), [episode.episode_id])
    except NotFound:
        raise Http404("No such episode in this memory space.") from None
    except MemoryPermissionDenied:
        raise PermissionDenied from None
    episode.refresh_from_db()
    if archive:
        message = _("Episode %(id)s is archived.") % {"id": episode.episode_id}
    else:
        message = _("Episode %(id)s is active again.") % {"id": episode.episode_id}
    return _row_response(request, scope, keys, episode, message)


@require_POST
@scope_view(roles.OPERATE)
def episode_archive(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    return _change_status(request, scope, keys, episode_id, archive=True)


@require_POST
@scope_view(roles.OPERATE)
def episode_restore(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    return _change_status(request, scope, keys, episode_id, archive=False)


@require_POST
@scope_view(roles.DELETE)
def episode_delete(request: HttpRequest, scope: Scope, keys: ScopeKeys, episode_id: str) -> HttpResponse:
    """Deletes after a confirmation: htmx asks with hx-confirm; without JavaScript a page asks."""
    episode = _episode_or_404(keys, episode_id)
    episodes_url = reverse("console:episodes", args=[scope.pk])
    if request.POST.get("confirmed") != "1":
        context = _scope_context(
            request, scope, keys, "episodes", episode=episode, next=_next_url(request, episodes_url)
        )
        return render_screen(
            request, "console/episode_confirm_delete.html", "console/_episode_confirm_delete.html", context
        )
    try:
        ops.delete(keys, actor_for(request), [episode.episode_id])
    except NotFound:
        raise Http404("No such episode in this memory space.") from None
    except MemoryPermissionDenied:
        raise PermissionDenied from None
    message = _("Episode %(id)s was deleted.") % {"id": episode.episode_id}
    if wants_fragment(request):
        response = render(request, "console/_episode_row_deleted.html", {"episode": episode, "flash": message})
        return trigger_client_event(response, "episodeCountsChanged")
    messages.success(request, message)
    next_url = _next_url(request, episodes_url)
    if reverse("console:episode_detail", args=[scope.pk, episode.episode_id]) in next_url:
        next_url = episodes_url
    return redirect(next_url)


BULK_PERMISSIONS = {"archive": roles.OPERATE, "restore": roles.OPERATE, "delete": roles.DELETE}


def _bulk_preview(keys: ScopeKeys, action: str, ids: list[str]) -> dict[str, Any]:
    found = dict(ops.episodes_by_ids(Q(user_key=keys.user_key), ids).values_list("episode_id", "status"))
    if action == "archive":
        changing = [i for i in ids if i in found and found[i] != STATUS_ARCHIVED]
    elif action == "restore":
        changing = [i for i in ids if i in found and found[i] != STATUS_ACTIVE]
    else:
        changing = [i for i in ids if i in found]
    return {"selected": len(ids), "found": [i for i in ids if i in found], "changing": len(changing)}


@require_POST
@scope_view()
def episodes_bulk(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """Bulk archive/restore/delete: the first post previews how many would change, the second acts."""
    form = forms.BulkActionForm(request.POST)
    episodes_url = reverse("console:episodes", args=[scope.pk])
    context = _scope_context(request, scope, keys, "episodes", bulk=form, next=_next_url(request, episodes_url))
    if not form.is_valid():
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context, 400)
    action, ids = form.cleaned_data["action"], form.cleaned_data["episode_ids"]
    require_perm(request.user, BULK_PERMISSIONS[action])
    preview = _bulk_preview(keys, action, ids)
    if not form.cleaned_data["confirmed"] or not preview["found"]:
        context.update(preview=preview, action=action, ids=preview["found"])
        return render_screen(request, "console/bulk_confirm.html", "console/_bulk_preview.html", context)
    actor = actor_for(request)
    try:
        if action == "delete":
            changed = ops.delete(keys, actor, preview["found"])
        else:
            changed = len((ops.archive if action == "archive" else ops.restore)(keys, actor, preview["found"]))
    except NotFound:
        raise Http404("No such episode in this memory space.") from None
    message = {
        "archive": ngettext("%(n)d episode archived.", "%(n)d episodes archived.", changed),
        "restore": ngettext("%(n)d episode restored.", "%(n)d episodes restored.", changed),
        "delete": ngettext("%(n)d episode deleted.", "%(n)d episodes deleted.", changed),
    }[action] % {"n": changed}
    if wants_fragment(request):
        response = render(request, "console/_bulk_done.html", {"flash": message})
        return trigger_client_event(response, "episodesChanged")
    messages.success(request, message)
    return redirect(context["next"])


# --- profiles -----------------------------------------------------------------------------------


@require_GET
@scope_view()
def profiles(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, str(forms.CURSOR_ERROR))
    session_profile, session_row = ops.get_profile(keys, PROFILE_SESSION)
    rows = Profile.objects.filter(scope_key=keys.scope_key, type=PROFILE_SPEAKER)
    page = keyset_page(rows, "id", form.cleaned_data.get("cursor"), SPEAKERS_PER_PAGE)
    speaker_profiles = [(row, row.payload) for row in page.items]
    context = _scope_context(
        request,
        scope,
        keys,
        "profiles",
        session_profile=session_profile,
        session_row=session_row,
        speaker_profiles=speaker_profiles,
        page=page,
        speakers=_known_speakers(keys),
    )
    return render_screen(request, "console/profile_list.html", "console/_speaker_profiles.html", context)


def _profile_owner(profile_type: str, sender_id: str) -> tuple[str, str]:
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise Http404("No such profile type.")
    if profile_type == PROFILE_SESSION:
        return profile_type, ""
    return profile_type, sender_id.strip()


def _diff_lines(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """A line diff of two profile versions: [(kind, text)] with kind in {'same', 'added', 'removed'}."""

    # Outside the f-strings, where makemessages can find them.
    name, trait, preference, notes = _("Name"), _("Trait"), _("Preference"), _("Notes")

    def lines(data: dict[str, Any]) -> list[str]:
        out = [f"{name}: {data.get('name', '')}"]
        out += [f"{trait}: {item}" for item in data.get("traits", [])]
        out += [f"{preference}: {item}" for item in data.get("preferences", [])]
        out += [f"{notes}: {line}" for line in (data.get("notes") or "").splitlines()]
        return out

    kinds = {" ": "same", "+": "added", "-": "removed"}
    return [(kinds[line[0]], line[2:]) for line in difflib.ndiff(lines(old), lines(new)) if line[0] in kinds]


def _profile_context(
    request: HttpRequest,
    scope: Scope,
    keys: ScopeKeys,
    profile_type: str,
    sender_id: str,
    edit_form: forms.ProfileForm | None = None,
    view: forms.VersionDiffForm | None = None,
) -> dict[str, Any]:
    data, row = ops.get_profile(keys, profile_type, sender_id)
    cursor = diff_from = diff_to = None
    if view is not None and view.is_valid():
        cursor, diff_from, diff_to = (view.cleaned_data.get(n) for n in ("cursor", "diff_from", "diff_to"))
    versions = keyset_page(row.versions.all(), "version", cursor, VERSIONS_PER_PAGE) if row else None
    diff = None
    if row and row.version > 1:
        diff_to = diff_to or row.version
        diff_from = diff_from or max(1, diff_to - 1)
        pair = {v.version: v for v in row.versions.filter(version__in=[diff_from, diff_to])}
        if diff_from in pair and diff_to in pair:
            diff = {
                "from": diff_from,
                "to": diff_to,
                "lines": _diff_lines(pair[diff_from].payload, pair[diff_to].payload),
            }
        elif view is not None:
            view.add_error("diff_from", _("There is no such version of this profile."))
    form = edit_form or forms.ProfileForm(initial=forms.ProfileForm.initial_from(data, sender_id))
    return _scope_context(
        request,
        scope,
        keys,
        "profiles",
        profile_type=profile_type,
        sender_id=sender_id,
        profile=data,
        row=row,
        versions=versions,
        diff=diff,
        form=form,
        view_form=view,
    )


@require_GET
@scope_view()
def profile_detail(request: HttpRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    view = forms.VersionDiffForm(request.GET)
    if not view.is_valid():
        return _bad_request(request, _("The profile address is not valid."))
    profile_type, sender_id = _profile_owner(profile_type, view.cleaned_data["sender"])
    if profile_type == PROFILE_SPEAKER and not sender_id:
        return redirect("console:profiles", scope_id=scope.pk)
    context = _profile_context(request, scope, keys, profile_type, sender_id, view=view)
    status = 400 if view.errors else 200
    return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, status)


def _after_profile_change(
    request: HttpRequest, scope: Scope, keys: ScopeKeys, profile_type: str, sender_id: str, message: str
) -> HttpResponse:
    if wants_fragment(request):
        context = _profile_context(request, scope, keys, profile_type, sender_id)
        response = render(request, "console/_profile_panel.html", {**context, "flash": message})
        return trigger_client_event(response, "profileChanged")
    messages.success(request, message)
    url = reverse("console:profile_detail", args=[scope.pk, profile_type])
    return redirect(f"{url}?{urlencode({'sender': sender_id})}" if sender_id else url)


def _posted_owner(request: HttpRequest, profile_type: str) -> tuple[str, str]:
    sender_id = request.POST.get("sender_id", "")
    if len(sender_id) > ops.MAX_SENDER_CHARS:
        raise Http404("No such profile.")
    if "\x00" in sender_id:  # no profile can have it; answered before any read that would refuse it
        raise BadRequest("sender_id contains a NUL character")
    profile_type, sender_id = _profile_owner(profile_type, sender_id)
    if profile_type == PROFILE_SPEAKER and not sender_id:
        raise Http404("No such profile.")
    return profile_type, sender_id


@require_POST
@scope_view(roles.OPERATE)
def profile_edit(request: HttpRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    profile_type, sender_id = _posted_owner(request, profile_type)
    form = forms.ProfileForm(request.POST)
    if form.is_valid():
        try:
            row = ops.replace_profile(keys, actor_for(request), profile_type, sender_id, form.profile_data())
        except MemoryValidationError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except MemoryPermissionDenied:
            raise PermissionDenied from None
        else:
            message = _("Profile saved as version %(version)d.") % {"version": row.version}
            return _after_profile_change(request, scope, keys, profile_type, sender_id, message)
    context = _profile_context(request, scope, keys, profile_type, sender_id, edit_form=form)
    return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, 400)


@require_POST
@scope_view(roles.OPERATE)
def profile_rollback(request: HttpRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    profile_type, sender_id = _posted_owner(request, profile_type)
    form = forms.RollbackForm(request.POST)
    if not form.is_valid():
        return _bad_request(request, _("Choose a version to roll back to."))
    version = form.cleaned_data["version"]
    try:
        row = ops.rollback_profile(keys, actor_for(request), profile_type, sender_id, version)
    except NotFound:
        raise Http404("No such profile version.") from None
    except MemoryPermissionDenied:
        raise PermissionDenied from None
    message = _("Rolled back to version %(old)d (saved as version %(new)d).") % {"old": version, "new": row.version}
    return _after_profile_change(request, scope, keys, profile_type, sender_id, message)


# --- injection ----------------------------------------------------------------------------------


def _snapshots(keys: ScopeKeys) -> Any:
    return InjectionSnapshot.objects.filter(scope_key=keys.scope_key, isolation=keys.isolation)


@require_GET
@scope_view()
def injection(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, str(forms.CURSOR_ERROR))
    page = keyset_page(_snapshots(keys), "id", form.cleaned_data.get("cursor"), SNAPSHOTS_PER_PAGE)
    latest = _snapshots(keys).order_by("-id").first()
    context = _scope_context(request, scope, keys, "injection", page=page, latest=latest)
    return render_screen(request, "console/injection_list.html", "console/_injection_history.html", context)


@require_GET
@scope_view()
def injection_detail(request: HttpRequest, scope: Scope, keys: ScopeKeys, snapshot_id: str) -> HttpResponse:
    snapshot = _snapshots(keys).filter(snapshot_id=snapshot_id).first()
    if snapshot is None:
        raise Http404("No such injection snapshot in this memory space.")
    context = _scope_context(request, scope, keys, "injection", snapshot=snapshot)
    return render_screen(request, "console/injection_detail.html", "console/_snapshot_panel.html", context)


# --- audit --------------------------------------------------------------------------------------


AUDIT_OPERATIONS = (
    "remember",
    "archive",
    "restore",
    "delete",
    "profile_update",
    "profile_rollback",
    "inject",
    "export",
    "audit_export",
    "import",
    "erase_subject",
    "scope_open",
)


def _audit_rows(keys: ScopeKeys, operation: str = "", actor: str = "") -> list[Any]:
    """The scope's entries (by scope_key, or by user_key: the episodes it shares in bot isolation),
    the same set as the audit export, as two querysets that each walk one index in seq order;
    `keyset_page` merges them."""
    parts = [AuditEntry.objects.filter(user_key=keys.user_key), AuditEntry.objects.filter(scope_key=keys.scope_key)]
    if operation:
        parts = [part.filter(operation=operation) for part in parts]
    if actor:
        parts = [part.filter(actor__icontains=actor) for part in parts]
    return parts


@require_GET
@scope_view()
def audit_log(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.AuditFilterForm(request.GET)
    page, status = None, 400
    if form.is_valid():
        data = form.cleaned_data
        rows = _audit_rows(keys, data["operation"].strip(), data["actor"].strip())
        page, status = keyset_page(rows, "seq", data.get("cursor"), AUDIT_PER_PAGE), 200
    context = _scope_context(request, scope, keys, "audit", form=form, page=page, operations=AUDIT_OPERATIONS)
    return render_screen(request, "console/audit_list.html", "console/_audit_list.html", context, status)


@require_POST
@scope_view(roles.EXPORT)
def audit_export(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The scope's whole audit log as the JSON envelope of DESIGN.md §7 (the export is audited)."""
    try:
        chunks = exports.stream_audit_export(keys, actor_for(request))
    except MemoryPermissionDenied:
        raise PermissionDenied from None
    response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
    name = exports.export_filename(keys).replace("memconsole-", "memconsole-audit-", 1)
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response


# --- export and import --------------------------------------------------------------------------


@require_GET
@scope_view()
def export(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    context = _scope_context(request, scope, keys, "export", form=forms.ExportForm())
    return render_screen(request, "console/export_form.html", "console/_export_form.html", context)


@require_POST
@scope_view(roles.EXPORT)
def export_download(request: HttpRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.ExportForm(request.POST)
    if not form.is_valid():
        context = _scope_context(request, scope, keys, "export", form=form)
        return render_screen(request, "console/export_form.html", "console/_export_form.html", context, 400)
    try:
        chunks = exports.stream_scope_export(
            keys,
            actor_for(request),
            statuses=form.cleaned_data["statuses"],
            include_audit=form.cleaned_data["include_audit"],
        )
    except MemoryValidationError as exc:
        form.add_error(None, exc.message)
        context = _scope_context(request, scope, keys, "export", form=form)
        return render_screen(request, "console/export_form.html", "console/_export_form.html", context, 400)
    except MemoryPermissionDenied:
        raise PermissionDenied from None
    response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, exports.export_filename(keys))
    return response


@require_http_methods(["GET", "POST"])
@console_view
def import_upload(request: HttpRequest) -> HttpResponse:
    """Upload a file into a target space; a dry run (the default) reports without writing."""
    require_perm(request.user, roles.VIEW)
    require_perm(request.user, roles.IMPORT)
    if request.method == "GET":
        initial: dict[str, Any] = {"dry_run": True}
        scope = _scope_from_query(request)
        if scope is not None:
            initial.update(bot_uuid=scope.bot_uuid, session_name=scope.session_name, isolation=scope.isolation)
        form = forms.ImportForm(initial=initial)
        return render_screen(request, "console/import_form.html", "console/_import_report.html", {"form": form})
    form = forms.ImportForm(request.POST, request.FILES)
    report, targets, status = None, [], 400
    if form.is_valid():
        if not may_use_bot(request.user, form.cleaned_data["bot_uuid"]):
            form.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        else:
            report, status = _run_import(request, form)
    if report and not report.get("dry_run"):
        for item in report.get("scopes", []):
            row = Scope.objects.filter(scope_key=item.get("scope_key"), isolation=item.get("isolation")).first()
            if row is not None:
                targets.append(row)
    context = {"form": form, "report": report, "targets": targets}
    return render_screen(request, "console/import_form.html", "console/_import_report.html", context, status)


def _run_import(request: HttpRequest, form: forms.ImportForm) -> tuple[dict[str, Any] | None, int]:
    data = form.cleaned_data
    try:
        report = imports.import_upload(
            data["file"],
            data["format"],
            bot_uuid=data["bot_uuid"],
            session_name=data["session_name"] or None,
            isolation=data["isolation"],
            actor=actor_for(request),
            dry_run=data["dry_run"],
        )
    except MemoryValidationError as exc:
        form.add_error("file", exc.message)
        return None, 400
    except MemoryPermissionDenied:
        form.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None, 400
    return report.as_dict(), 200


# --- diagnostics --------------------------------------------------------------------------------


def _diagnostics_context(request: HttpRequest, form: forms.PageForm) -> dict[str, Any]:
    runs = keyset_page(HealthRun.objects.all(), "id", form.cleaned_data.get("cursor"), HEALTH_HISTORY)
    latest = HealthRun.objects.order_by("-id").first()
    scope = _scope_from_query(request)
    return {"latest": latest, "runs": runs, "scope": scope, "tab": "diagnostics", **user_permissions(request.user)}


@require_GET
@console_view
def diagnostics(request: HttpRequest) -> HttpResponse:
    require_perm(request.user, roles.VIEW)
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, str(forms.CURSOR_ERROR))
    context = _diagnostics_context(request, form)
    return render_screen(request, "console/diagnostics.html", "console/_health.html", context)


@require_POST
@console_view
def diagnostics_run(request: HttpRequest) -> HttpResponse:
    require_perm(request.user, roles.VIEW)
    require_perm(request.user, roles.OPERATE)
    health.run_health_check(actor_for(request))
    if wants_fragment(request):
        form = forms.PageForm({})
        form.is_valid()
        return render(request, "console/_health.html", _diagnostics_context(request, form))
    messages.success(request, _("The health check has run; its results are below."))
    return redirect("console:diagnostics")


# --- erasure ------------------------------------------------------------------------------------


def _erasure_bot(request: HttpRequest, form: forms.ErasureForm) -> str:
    """The bot to erase within ('' = every bot): 404 outside the user's grants, 403 for every bot
    when the user is limited to some."""
    bot_uuid = form.cleaned_data["bot_uuid"]
    allowed = roles.allowed_bots(request.user)
    if allowed is not None:
        if not bot_uuid:
            raise PermissionDenied
        if bot_uuid not in allowed:
            raise Http404("No such bot.")
    return bot_uuid


def _erase(
    request: HttpRequest, form: forms.ErasureForm, bot_uuid: str, *, dry_run: bool
) -> erasure.ErasureReport | None:
    """Runs `erase_subject` (which writes the audited receipt); None with the error on the form."""
    try:
        return erasure.erase_subject(
            form.cleaned_data["sender_id"], bot_uuid=bot_uuid or None, actor=actor_for(request), dry_run=dry_run
        )
    except MemoryValidationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return None
    except MemoryPermissionDenied:
        raise PermissionDenied from None


def _erasure_screen(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    return render_screen(request, "console/erasure.html", "console/_erasure.html", context, status)


@require_http_methods(["GET", "POST"])
@console_view
def erasure_form(request: HttpRequest) -> HttpResponse:
    """Erase a person, steps 1 and 2: the form, then a dry run (POST) that counts what would go and
    asks for the speaker id again. The id travels in request bodies, never in a URL or its logs."""
    require_perm(request.user, roles.VIEW)
    require_perm(request.user, roles.DELETE)
    bots = roles.allowed_bots(request.user)
    form = forms.ErasureForm(request.POST if request.method == "POST" else None, bots=bots)
    if not form.is_bound:
        return _erasure_screen(request, {"form": form})
    if not form.is_valid():
        return _erasure_screen(request, {"form": form}, 400)
    bot_uuid = _erasure_bot(request, form)
    report = _erase(request, form, bot_uuid, dry_run=True)
    if report is None:
        return _erasure_screen(request, {"form": form}, 400)
    confirm = forms.ErasureConfirmForm(initial={"sender_id": form.cleaned_data["sender_id"], "bot_uuid": bot_uuid})
    return _erasure_screen(request, {"form": form, "report": report, "confirm": confirm})


@require_POST
@console_view
def erasure_run(request: HttpRequest) -> HttpResponse:
    """Erase a person, step 3: with the speaker id typed again, erase for real and show the receipt."""
    require_perm(request.user, roles.VIEW)
    require_perm(request.user, roles.DELETE)
    form = forms.ErasureForm(request.POST, bots=roles.allowed_bots(request.user))
    if not form.is_valid():
        return _erasure_screen(request, {"form": form}, 400)
    bot_uuid = _erasure_bot(request, form)
    confirm = forms.ErasureConfirmForm(request.POST)
    report = _erase(request, form, bot_uuid, dry_run=not confirm.is_valid())
    if report is None:
        return _erasure_screen(request, {"form": form}, 400)
    if report.dry_run:  # the typed id did not match: the counts again, with the error
        return _erasure_screen(request, {"form": form, "report": report, "confirm": confirm}, 400)
    return _erasure_screen(request, {"receipt": report})
