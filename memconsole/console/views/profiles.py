"""The Profiles tab: the session profile, speaker profiles, their versions, edits and rollbacks."""

from __future__ import annotations

import difflib
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from memconsole.memory import facts, people, queries, roles, window
from memconsole.memory.errors import Conflict
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import PROFILE_SESSION, PROFILE_SPEAKER, Profile, Scope
from memconsole.memory.profiles import EMPTY_PROFILE, get_profile, replace_profile, rollback_profile
from memconsole.memory.scopes import ScopeKeys
from memconsole.memory.validation import MAX_SENDER_CHARS

from .. import forms, profile_forms
from ..access import ConsoleRequest, scope_view
from ..screens import bad_request, render_screen, scope_context, wants_fragment

VERSIONS_PER_PAGE = 20
SPEAKERS_PER_PAGE = 50


@require_GET
@scope_view()
def profiles(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.PageForm(request.GET)
    if not form.is_valid():
        return bad_request(request, str(forms.CURSOR_ERROR))
    session_profile, session_row = get_profile(keys, PROFILE_SESSION)
    page = queries.speaker_profile_page(keys, form.cleaned_data.get("cursor"), SPEAKERS_PER_PAGE)
    context = scope_context(
        request,
        scope,
        keys,
        "profiles",
        session_profile=session_profile,
        session_row=session_row,
        speaker_profiles=[(row, row.payload) for row in page.items],
        page=page,
        speakers=people.scope_people(keys),
    )
    return render_screen(request, "console/profile_list.html", "console/_speaker_profiles.html", context)


def _profile_owner(profile_type: str, sender_id: str) -> tuple[str, str]:
    """(type, sender_id) named by the URL: 404 for a type that does not exist."""
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


def _diff(row: Profile, view: profile_forms.VersionDiffForm | None, diff_from: int | None, diff_to: int | None) -> Any:
    """The diff of two versions (by default the newest against the one before), None when there
    is only one version or a requested one does not exist (an error on `view`)."""
    if row.version <= 1:
        return None
    diff_to = diff_to or row.version
    diff_from = diff_from or max(1, diff_to - 1)
    pair = queries.profile_versions(row, [diff_from, diff_to])
    if diff_from in pair and diff_to in pair:
        return {"from": diff_from, "to": diff_to, "lines": _diff_lines(pair[diff_from].payload, pair[diff_to].payload)}
    if view is not None:
        view.add_error("diff_from", _("There is no such version of this profile."))
    return None


def _profile_context(
    request: ConsoleRequest,
    scope: Scope,
    keys: ScopeKeys,
    owner: tuple[str, str],
    edit_form: profile_forms.ProfileForm | None = None,
    view: profile_forms.VersionDiffForm | None = None,
    **extra: Any,
) -> dict[str, Any]:
    profile_type, sender_id = owner
    data, row = get_profile(keys, profile_type, sender_id)
    cursor = diff_from = diff_to = None
    if view is not None and view.is_valid():
        cursor, diff_from, diff_to = (view.cleaned_data.get(n) for n in ("cursor", "diff_from", "diff_to"))
    return scope_context(
        request,
        scope,
        keys,
        "profiles",
        profile_type=profile_type,
        sender_id=sender_id,
        profile=data,
        row=row,
        versions=queries.profile_version_page(row, cursor, VERSIONS_PER_PAGE) if row else None,
        diff=_diff(row, view, diff_from, diff_to) if row else None,
        form=edit_form
        or profile_forms.ProfileForm(
            initial=profile_forms.ProfileForm.initial_from(data, sender_id, row.version if row else 0)
        ),
        view_form=view,
        # Issue 20: a speaker's keyed facts; the chat's conversation window on its session profile.
        speaker_facts=facts.speaker_facts(keys.user_key, sender_id) if profile_type == PROFILE_SPEAKER else [],
        conversation=window.chat_messages(keys.scope_key) if profile_type != PROFILE_SPEAKER else [],
        **extra,
    )


@require_GET
@scope_view()
def profile_detail(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    view = profile_forms.VersionDiffForm(request.GET)
    if not view.is_valid():
        return bad_request(request, _("The profile address is not valid."))
    owner = _profile_owner(profile_type, view.cleaned_data["sender"])
    if owner == (PROFILE_SPEAKER, ""):
        return redirect("console:profiles", scope_id=scope.pk)
    unknown = False
    if owner[0] == PROFILE_SPEAKER:  # a name or an id (people.py): a name opens its one id, or asks which
        lookup = people.find_in_scope(keys, owner[1])
        unknown = lookup.person is None and not lookup.choices  # said on the page: no such person yet
        if lookup.ambiguous:
            context = scope_context(request, scope, keys, "profiles", lookup=lookup)
            return render_screen(request, "console/speaker_choice.html", "console/_speaker_choice.html", context)
        if lookup.person and lookup.person.sender_id != owner[1]:
            url = reverse("console:profile_detail", args=[scope.pk, PROFILE_SPEAKER])
            return redirect(f"{url}?{urlencode({'sender': lookup.person.sender_id})}")
    context = _profile_context(request, scope, keys, owner, view=view, unknown=unknown)
    status = 400 if view.errors else 200
    return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, status)


def _after_change(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, owner: tuple[str, str], message: str
) -> HttpResponse:
    """The re-rendered profile panel for htmx (and an event), else back to the profile page."""
    if wants_fragment(request):
        context = _profile_context(request, scope, keys, owner)
        response = render(request, "console/_profile_panel.html", {**context, "flash": message})
        return trigger_client_event(response, "profileChanged")
    messages.success(request, message)
    profile_type, sender_id = owner
    url = reverse("console:profile_detail", args=[scope.pk, profile_type])
    return redirect(f"{url}?{urlencode({'sender': sender_id})}" if sender_id else url)


def _posted_owner(request: ConsoleRequest, profile_type: str) -> tuple[str, str]:
    sender_id = request.POST.get("sender_id", "")
    if len(sender_id) > MAX_SENDER_CHARS:
        raise Http404("No such profile.")
    if "\x00" in sender_id:  # no profile can have it; answered before any read that would refuse it
        raise BadRequest("sender_id contains a NUL character")
    owner = _profile_owner(profile_type, sender_id)
    if owner == (PROFILE_SPEAKER, ""):
        raise Http404("No such profile.")
    return owner


@require_POST
@scope_view(roles.OPERATE)
def profile_edit(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    owner = _posted_owner(request, profile_type)
    form = profile_forms.ProfileForm(request.POST)
    if form.is_valid():
        read = form.cleaned_data["version"]  # the version the form was rendered from (None: not sent)
        try:
            row = replace_profile(keys, request.actor, *owner, form.profile_data(), if_version=read)
        except MemoryValidationError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.in_language())
        except Conflict as exc:
            return _conflict(request, scope, keys, owner, read or 0, exc.current_version)
        else:
            if read is not None and row.version == read:
                message = _("Nothing changed: the profile is as it was (version %(version)d).") % {
                    "version": row.version
                }
            else:
                message = _("Profile saved as version %(version)d.") % {"version": row.version}
            return _after_change(request, scope, keys, owner, message)
    context = _profile_context(request, scope, keys, owner, edit_form=form)
    return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, 400)


def _conflict(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, owner: tuple[str, str], read: int, current: int
) -> HttpResponse:
    """409: someone saved the profile since this form was rendered. Show their change (the version
    read against the current one) and the admin's own edit, now based on the current version, so
    that saving again re-applies it knowingly: a field the admin left as they read it takes the
    current value, so saving again keeps the other change there."""
    profile, row = get_profile(keys, *owner)
    earlier = queries.profile_versions(row, [read]).get(read) if row and read else None
    read_data = earlier.payload if earlier else EMPTY_PROFILE
    changes = _diff_lines(read_data, profile)
    data = request.POST.copy()
    data["version"] = str(current)
    as_read = profile_forms.ProfileForm.initial_from(read_data, owner[1])
    as_now = profile_forms.ProfileForm.initial_from(profile, owner[1])
    for name in ("name", "traits", "preferences", "notes"):
        if _same_text(data.get(name, ""), as_read[name]):
            data[name] = as_now[name]
    edit_form = profile_forms.ProfileForm(data)
    edit_form.is_valid()  # valid (it was): bound, so the admin's values are shown again
    conflict = {"read": read, "current": current, "lines": changes}
    context = _profile_context(request, scope, keys, owner, edit_form=edit_form, conflict=conflict)
    return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, 409)


def _same_text(posted: str, read: str) -> bool:
    """Whether a posted field says what the version read did (line ends and outer blanks aside)."""
    return posted.replace("\r\n", "\n").strip() == read.replace("\r\n", "\n").strip()


@require_POST
@scope_view(roles.OPERATE)
def profile_rollback(request: ConsoleRequest, scope: Scope, keys: ScopeKeys, profile_type: str) -> HttpResponse:
    owner = _posted_owner(request, profile_type)
    form = profile_forms.RollbackForm(request.POST)
    if not form.is_valid():
        return bad_request(request, _("Choose a version to roll back to."))
    version, seen = form.cleaned_data["version"], form.cleaned_data["current"]
    current = get_profile(keys, *owner)[1]
    before = current.version if current else 0
    try:
        row = rollback_profile(keys, request.actor, *owner, version, if_version=seen)
    except Conflict as exc:
        message = _(
            "Nothing was rolled back: someone saved version %(current)d after you opened this page. "
            "Read the current version, then roll back again if you still want to."
        ) % {"current": exc.current_version}
        context = _profile_context(request, scope, keys, owner, rollback_conflict=message)
        return render_screen(request, "console/profile_detail.html", "console/_profile_panel.html", context, 409)
    if row.version == before:
        message = _("Nothing changed: version %(old)d holds what the profile holds now.") % {"old": version}
    else:
        message = _("Rolled back to version %(old)d (saved as version %(new)d).") % {"old": version, "new": row.version}
    return _after_change(request, scope, keys, owner, message)
