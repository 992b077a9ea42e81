"""Console forms: every query parameter and posted field is validated here, so bad input is a 400
with the reason shown beside the field, never a 500."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_lazy as _

from memconsole.memory import validation
from memconsole.memory.episode_extras import MAX_KIND_CHARS
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import ISOLATION_BOT, ISOLATION_SESSION, Status
from memconsole.memory.paging import CURSOR, SORTED_CURSOR
from memconsole.memory.scopes import MAX_BOT_UUID, MAX_SESSION_NAME, derive_scope

from .people_forms import PersonLookup
from .timezones import ZonedDateTimeField, datetime_input, in_console_zone
from .usage_forms import UsageFilter

CURSOR_ERROR = _("This page link is not valid. Go back to the first page and try again.")
STATUS_ALL = "all"
MAX_BULK = 200
DEFAULT_PAGE_SIZE = 25
DEFAULT_TOP_K = 10

ISOLATION_CHOICES = [
    (ISOLATION_SESSION, _("Session (memory kept per chat session)")),
    (ISOLATION_BOT, _("Bot (memory shared by all sessions of the bot)")),
]
SORT_CHOICES = [
    ("time", _("Newest first (event time)")),
    ("importance", _("Most important first")),
    ("stored", _("Last stored first")),
]
STATUS_FILTER_CHOICES = [
    *((status.value, status.label) for status in (Status.ACTIVE, Status.ARCHIVED, Status.SUPERSEDED)),
    (STATUS_ALL, _("All statuses")),
]


class ConsoleForm(forms.Form):
    """Labels without a trailing colon, so that a field's accessible name is exactly its label."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


def lazy_format(message: Promise, **values: Any) -> str:
    """`message % values`, worked out when shown (a lazy string). Formatting a lazy message at class level would
    translate it once, at import, into the default language for everyone."""
    return lazy(lambda: str(message) % values, str)()


def cursor_field(pattern: str = CURSOR.pattern) -> forms.RegexField:
    return forms.RegexField(
        regex=rf"\A(?:{pattern})\Z",
        required=False,
        widget=forms.HiddenInput,
        error_messages={"invalid": CURSOR_ERROR},
    )


class ScopeSearchForm(ConsoleForm):
    q = forms.CharField(label=_("Find a scope"), required=False, max_length=255)
    cursor = cursor_field()


class DeriveForm(ConsoleForm):
    """Derives a space's keys exactly as the bot does (docs/design.md §2)."""

    bot_uuid = forms.CharField(label=_("Bot UUID"), required=False, max_length=MAX_BOT_UUID, strip=True)
    session_name = forms.CharField(label=_("Session name"), max_length=MAX_SESSION_NAME, strip=False)
    isolation = forms.ChoiceField(label=_("Isolation"), choices=ISOLATION_CHOICES, initial=ISOLATION_SESSION)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        try:
            data["keys"] = derive_scope(data.get("bot_uuid", ""), data.get("session_name"), data.get("isolation"))
        except MemoryValidationError as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, exc.in_language())
        return data


SEARCH_INPUT = forms.TextInput(attrs={"type": "search"})
MAX_SEARCH_CHARS = 300  # a GET form's URL: 2.7 KB of encoded Chinese, within gunicorn's 4,094-byte line


class EpisodeFilterForm(UsageFilter, ConsoleForm):
    """Filters, page size and cursor of the Episodes tab; with `q`, a semantic search. Usage: usage_forms.py."""

    q = forms.CharField(label=_("Search episodes"), required=False, max_length=MAX_SEARCH_CHARS, widget=SEARCH_INPUT)
    top_k = forms.IntegerField(
        label=_("Number of results"), required=False, min_value=1, max_value=validation.TOP_K_MAX, initial=DEFAULT_TOP_K
    )
    status = forms.ChoiceField(label=_("Status"), choices=STATUS_FILTER_CHOICES, required=False)
    sender = forms.CharField(
        label=_("Speaker"),
        required=False,
        max_length=validation.MAX_SENDER_CHARS,
        widget=forms.TextInput(attrs={"list": "speaker-list"}),
    )
    tag = forms.CharField(label=_("Tag"), required=False, max_length=validation.MAX_TAG_CHARS)
    kind = forms.RegexField(  # an episode's kind (issue 20)
        regex=validation.KIND,
        label=_("Kind"),
        required=False,
        max_length=MAX_KIND_CHARS,
        error_messages={"invalid": _("A kind is one word: letters, digits and _ . : - only.")},
    )
    importance = forms.IntegerField(label=_("Minimum importance"), required=False, min_value=1, max_value=5)
    after = ZonedDateTimeField(label=in_console_zone(_("From (%(zone)s)")), required=False, widget=datetime_input())
    before = ZonedDateTimeField(label=in_console_zone(_("Until (%(zone)s)")), required=False, widget=datetime_input())
    limit = forms.TypedChoiceField(
        label=_("Per page"),
        choices=[(n, n) for n in validation.PAGE_SIZES],
        coerce=int,
        required=False,
        initial=DEFAULT_PAGE_SIZE,
    )
    sort = forms.ChoiceField(label=_("Order"), choices=SORT_CHOICES, required=False)
    cursor = cursor_field(SORTED_CURSOR.pattern)

    def clean_tag(self) -> str:
        tag: str = self.cleaned_data["tag"].strip()
        if "," in tag:
            raise forms.ValidationError(_("A tag cannot contain a comma."))
        return tag

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        after, before = data.get("after"), data.get("before")
        if after and before and after > before:  # both bounds are inclusive: equal names one instant
            self.add_error("before", _("The end of the time range must be after its start."))
        return data

    @property
    def chosen_status(self) -> str:
        return self.cleaned_data.get("status") or Status.ACTIVE

    def statuses(self) -> list[str] | None:
        """None (every status) for "all", else the one status."""
        return None if self.chosen_status == STATUS_ALL else [self.chosen_status]

    def filters(self) -> dict[str, Any]:
        """Keyword filters shared by `episodes.list_episodes` and `retrieval.recall`."""
        data = self.cleaned_data
        return {
            "sender_id": data.get("sender") or None,
            "importance_min": data.get("importance"),
            "time_after": data.get("after"),
            "time_before": data.get("before"),
            "kind": data.get("kind") or None,
            **self.usage_filters(),
        }

    @property
    def searching(self) -> bool:
        """A search was asked for: a query with something visible in it (only spaces or invisible
        characters, "\u200b", is no query: the list is shown)."""
        return bool(validation.trimmed(self.cleaned_data.get("q", "")))

    @property
    def chosen_sort(self) -> str:
        return self.cleaned_data.get("sort") or "time"

    def list_filters(self) -> dict[str, Any]:
        """Every filter of the list (statuses and tag too), as `queries.episode_page` takes them."""
        data = self.cleaned_data
        return {"statuses": self.statuses(), "tag": data.get("tag") or None, **self.filters()}

    FILTER_FIELDS = ("status", "sender", "tag", "kind", "importance", "after", "before", "usage")

    @property
    def active_filter_count(self) -> int:
        """How many filters narrow the list (the page size is not one), read from the submitted
        values so that it holds for an invalid form too."""
        count = 0
        for name in self.FILTER_FIELDS:
            value = self[name].value()
            if name == "status":
                count += value not in (None, "", Status.ACTIVE)
            else:
                count += bool(str(value or "").strip())
        return count

    @property
    def filters_open(self) -> bool:
        """Whether the collapsible filter panel starts open: a filter is in use or has an error."""
        return bool(self.active_filter_count) or any(name in self.errors for name in self.FILTER_FIELDS)


class BulkActionForm(ConsoleForm):
    ACTIONS = [("archive", _("Archive")), ("restore", _("Restore")), ("delete", _("Delete"))]

    action = forms.ChoiceField(label=_("Bulk action"), choices=ACTIONS)
    episode_ids = forms.CharField(required=False)  # replaced by the list in clean_episode_ids
    confirmed = forms.BooleanField(required=False)
    # "matching": act on every episode the list's filters (`filter_query`) select, not on `episode_ids`.
    select = forms.ChoiceField(choices=[("", ""), ("matching", "matching")], required=False)
    filter_query = forms.CharField(required=False, max_length=4000)

    @property
    def by_filter(self) -> bool:
        return self.is_bound and self.data.get("select") == "matching"

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        self.id_list = data.getlist("episode_ids") if data is not None and hasattr(data, "getlist") else []

    def clean_episode_ids(self) -> list[str]:
        ids = list(dict.fromkeys(self.id_list))
        if self.by_filter:
            return []
        if not ids:
            raise forms.ValidationError(_("Select at least one episode first."))
        if len(ids) > MAX_BULK:
            raise forms.ValidationError(_("Select at most %(max)d episodes at a time.") % {"max": MAX_BULK})
        if not all(validation.EPISODE_ID.fullmatch(i) for i in ids):
            raise forms.ValidationError(_("The selection contains an episode id that is not valid."))
        return ids


# Version numbers are PositiveIntegerFields: a larger number cannot name one (and SQLite refuses
# integers beyond 64 bits in a query).
MAX_VERSION = validation.MAX_VERSION


class MultilineField(forms.CharField):
    """A textarea's text with its line breaks as "\n": a browser posts each as "\r\n" without
    JavaScript (and htmx posts "\n"), so limits count, and rows store, the same text either way."""

    def to_python(self, value: Any) -> str:
        text = super().to_python(value) or ""
        return text.replace("\r\n", "\n").replace("\r", "\n")


class AuditFilterForm(ConsoleForm):
    operation = forms.CharField(label=_("Operation"), required=False, max_length=40)
    actor = forms.CharField(label=_("Actor"), required=False, max_length=255)
    after = ZonedDateTimeField(label=in_console_zone(_("From (%(zone)s)")), required=False, widget=datetime_input())
    before = ZonedDateTimeField(label=in_console_zone(_("Until (%(zone)s)")), required=False, widget=datetime_input())
    space = forms.CharField(
        label=_("Space"), required=False, max_length=400, help_text=_("A scope key, or a bot UUID for all its spaces.")
    )
    target = forms.CharField(
        label=_("Target"), required=False, max_length=300, help_text=_("An id, or type:id such as user:3.")
    )
    batch = forms.RegexField(
        label=_("Batch"), required=False, regex=r"\A[0-9a-f]{32}\Z", help_text=_("A bulk action's batch id.")
    )
    cursor = cursor_field()

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("after") and data.get("before") and data["after"] >= data["before"]:
            self.add_error("before", _("The end of the time range must come after its start."))
        return data


class PageForm(ConsoleForm):
    cursor = cursor_field()


class ExportForm(ConsoleForm):
    statuses = forms.MultipleChoiceField(
        label=_("Episode statuses"),
        choices=Status.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=list(Status.values),
        error_messages={"required": _("Choose at least one status to export.")},
    )
    include_audit = forms.BooleanField(label=_("Include the audit log"), required=False)


IMPORT_FORMATS = [
    ("memconsole", _("memconsole export (JSON)")),
    ("langbot", _("LangBot LongTermMemory export (JSON)")),
    ("jw-agents", _("jw-agents memory.db (SQLite)")),
    ("bot-memory", _("bot-memory: an agent-memory memory.db (SQLite)")),
    ("mem0", _("mem0 / OpenMemory export (zip or JSON)")),
    ("letta", _("Letta agent file or archival export (JSON)")),
]


class ImportForm(ConsoleForm):
    file = forms.FileField(label=_("File"))
    format = forms.ChoiceField(label=_("Format"), choices=IMPORT_FORMATS)
    bot_uuid = forms.CharField(label=_("Bot UUID"), required=False, max_length=MAX_BOT_UUID)
    session_name = forms.CharField(
        label=_("Session name"),
        required=False,
        max_length=MAX_SESSION_NAME,
        strip=False,
        help_text=_("Leave empty to keep the sessions named in the file."),
    )
    isolation = forms.ChoiceField(label=_("Isolation"), choices=ISOLATION_CHOICES, initial=ISOLATION_SESSION)
    dry_run = forms.BooleanField(
        label=_("Dry run: check the file and report what would change, without importing"),
        required=False,
        initial=True,
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        session_name = data.get("session_name") or ""
        if not session_name.strip():
            data["session_name"] = session_name = ""
        try:
            derive_scope(data.get("bot_uuid", ""), session_name or "check", data.get("isolation"))
        except MemoryValidationError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.in_language())
        return data


class ErasureForm(PersonLookup, ConsoleForm):
    """Whom to erase. The speaker id is kept exactly as typed (episodes store it unstripped); a user
    limited to some bots picks one of them, since erasing across every bot needs an unrestricted admin."""

    sender_id = forms.CharField(label=_("Speaker ID"), max_length=validation.MAX_SENDER_CHARS)
    bot_uuid = forms.CharField(
        label=_("Bot UUID"),
        required=False,
        max_length=MAX_BOT_UUID,
        help_text=_("Leave empty to erase this speaker in every bot."),
    )

    def __init__(self, *args: Any, bots: frozenset[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, bots=bots, **kwargs)  # PersonLookup: a name is looked up among these bots
        if bots is not None:
            field = self.fields["bot_uuid"]
            field.widget = forms.Select(choices=[(bot, bot) for bot in sorted(bots)])
            field.help_text = _("Your account is limited to these bots: erase within one of them.")

    def clean_sender_id(self) -> str:
        sender_id: str = self.cleaned_data["sender_id"]
        if not sender_id.strip():
            raise forms.ValidationError(self.fields["sender_id"].error_messages["required"], code="required")
        return sender_id


class ErasureConfirmForm(ErasureForm):
    """The last step: the speaker id and bot carried over, and the speaker id typed again."""

    confirmation = forms.CharField(
        label=_("Type the speaker ID again to confirm"),
        max_length=validation.MAX_SENDER_CHARS,
        strip=False,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("sender_id", "bot_uuid"):
            self.fields[name].widget = forms.HiddenInput()

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        typed, sender_id = data.get("confirmation"), data.get("sender_id")
        if typed is not None and sender_id is not None and typed != sender_id:
            self.add_error("confirmation", _("This does not match the speaker ID. Type it exactly as shown above."))
        return data
