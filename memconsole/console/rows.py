"""The rows of the Episodes table, rendered in Python.

The Episodes page is the console's hottest screen (issue 7: a page of a million-episode scope in
a few milliseconds). Through the template engine, every row reversed five URLs, built two CSRF
tokens and ran three `{% blocktranslate %}`s, and cost more than all the page's queries together.
Like the result rows of Django's own admin changelist (`items_for_result`), they are built here
instead: each URL is reversed once per page and filled in per row, the labels are translated once
per page, every value is escaped, and the row actions are buttons of the page's one `row-actions`
form (in _episode_table.html, with its only CSRF token), each posting to its own `formaction`.

Each row has one actions menu (a `<details>`, so it opens without JavaScript): Open, Edit (when the
edit screen exists), Archive or Restore (no confirmation: the re-rendered row offers an Undo) and
Delete (confirmed, saying truthfully what the audit log keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from django.template.defaultfilters import floatformat, truncatechars
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from memconsole.memory.models import Episode, Status

from .templatetags.console import status_pill, timestamp

CONTENT_CHARS = 500
NO_TAGS = '<span class="muted">—</span>'
# The htmx delete posts the confirmation the no-JavaScript path asks for on a page of its own.
CONFIRMED = """ hx-vals='{"confirmed": "1"}'"""
# Any id the `episode` path converter accepts; only used to cut reversed URLs in two.
SAMPLE_ID = "0" * 12
# The episode edit screen's URL name; the menu links it only when it exists.
EDIT_URL_NAME = "console:episode_edit"
# The action that undoes each undoable one (restoring a superseded episode has no undo).
UNDO = {"archive": "restore", "restore": "archive"}
UNDO_FLAG = """ hx-vals='{"undo": "1"}'"""


class _UrlPattern:
    """One reversed URL split around the episode id: `for_episode` is a concatenation, not a reverse."""

    def __init__(self, name: str, scope_pk: int) -> None:
        self.prefix, self.suffix = reverse(name, args=[scope_pk, SAMPLE_ID]).rsplit(SAMPLE_ID, 1)

    def for_episode(self, episode_id: str) -> str:
        return escape(f"{self.prefix}{episode_id}{self.suffix}")


def _edit_pattern(scope_pk: int) -> _UrlPattern | None:
    try:
        return _UrlPattern(EDIT_URL_NAME, scope_pk)
    except NoReverseMatch:
        return None


def column_labels() -> dict[str, str]:
    """The table's column names, also each cell's data-label in the phone layout."""
    return {
        "select": _("Select"),
        "time": _("Time"),
        "speaker": _("Speaker"),
        "content": _("Content"),
        "tags": _("Tags"),
        "importance": _("Importance"),
        "status": _("Status"),
        "actions": _("Actions"),
    }


class RowRenderer:
    """Renders the rows of one scope's table for one user (who may operate, delete, or only view)."""

    def __init__(self, scope_pk: int, can_operate: bool, can_delete: bool) -> None:
        self.can_operate = can_operate
        self.can_delete = can_delete
        self.actions = can_operate or can_delete
        self._detail = _UrlPattern("console:episode_detail", scope_pk)
        self._archive = _UrlPattern("console:episode_archive", scope_pk)
        self._restore = _UrlPattern("console:episode_restore", scope_pk)
        self._delete = _UrlPattern("console:episode_delete", scope_pk)
        self._edit = _edit_pattern(scope_pk) if can_operate else None
        self.labels = column_labels()
        self._label = {name: escape(text) for name, text in self.labels.items()}
        self._unknown = f'<span class="muted">{escape(_("unknown"))}</span>'
        self._buttons = {
            name: escape(text)
            for name, text in (
                ("archive", _("Archive")),
                ("restore", _("Restore")),
                ("delete", _("Delete…")),
                ("undo", _("Undo")),
                ("open", _("Open")),
                ("edit", _("Edit")),
                ("menu", _("Actions")),
            )
        }
        read_only = _("read only")
        self._read_only = f'<span class="muted">{escape(read_only)}</span>'
        # Translated once; per row only the id is filled in.
        self._select = _("Select episode %(id)s")
        self._menu_label = _("Actions for episode %(id)s")
        self._undo_label = {"archive": _("Undo: restore episode %(id)s"), "restore": _("Undo: archive episode %(id)s")}
        self._confirm = _(
            "Delete episode %(id)s? The episode and its search vector are removed. The audit log keeps "
            "a copy of its content (its before-image) unless the person is erased."
        )
        self._pills: dict[str, str] = {}

    def rows(self, episodes: Sequence[Episode] = (), hits: Sequence[Any] = ()) -> list[SafeString]:
        """Rows of search `hits` (with their scores) when given, else of `episodes`."""
        if hits:
            return [self.row(hit.episode, hit) for hit in hits]
        return [self.row(episode) for episode in episodes]

    def row(self, episode: Episode, hit: Any = None, flash: str = "", undo: str = "") -> SafeString:
        """One row; `flash` says what an inline action just did, `undo` names the action (in UNDO)
        whose Undo button the row offers beside it."""
        episode_id = escape(episode.episode_id)
        status = episode.effective_status
        label = self._label
        cells = [f'<tr id="episode-{episode_id}" class="episode-row status-{status}">']
        if self.actions:
            select = escape(self._select % {"id": episode.episode_id})
            cells.append(
                f'<td class="select-cell" data-label="{label["select"]}"><input type="checkbox" name="episode_ids" '
                f'value="{episode_id}" form="bulk-form" aria-label="{select}"></td>'
            )
        cells.append(f'<td data-label="{label["time"]}">{timestamp(episode.timestamp)}</td>')
        cells.append(f'<td data-label="{label["speaker"]}">{self._speaker(episode)}</td>')
        cells.append(
            f'<td class="content-cell wide" data-label="{label["content"]}">'
            f'<a href="{self._detail.for_episode(episode.episode_id)}" class="episode-id"><code>{episode_id}</code></a>'
            f'<div class="episode-content">{escape(self._content(episode.content))}</div>'
            f"{self._score(hit) if hit else ''}</td>"
        )
        tags = " ".join(f'<span class="tag">{escape(str(tag))}</span>' for tag in episode.tags or ())
        cells.append(f'<td data-label="{label["tags"]}">{tags or NO_TAGS}</td>')
        cells.append(f'<td data-label="{label["importance"]}">{escape(str(episode.importance))}</td>')
        flash_html = f' <span class="flash" role="status">{escape(flash)}</span>' if flash else ""
        if flash and undo in UNDO and self.can_operate:
            flash_html += self._undo_button(undo, episode.episode_id)
        cells.append(f'<td data-label="{label["status"]}">{self._pill(status)}{flash_html}</td>')
        cells.append(f'<td class="actions">{self._actions(episode, status)}</td></tr>')
        return mark_safe("".join(cells))  # every value above is escaped

    def _actions(self, episode: Episode, status: str) -> str:
        episode_id = episode.episode_id
        items = [f'<a href="{self._detail.for_episode(episode_id)}">{self._buttons["open"]}</a>']
        if self._edit is not None:
            items.append(f'<a href="{self._edit.for_episode(episode_id)}">{self._buttons["edit"]}</a>')
        if not self.actions:
            return f"{items[0]} {self._read_only}"
        if self.can_operate and status != Status.ARCHIVED:
            items.append(self._button("archive", self._archive.for_episode(episode_id), "secondary"))
        if self.can_operate and status != Status.ACTIVE:
            items.append(self._button("restore", self._restore.for_episode(episode_id), "secondary"))
        if self.can_delete:
            confirm = escape(self._confirm % {"id": episode_id})
            extra = f'{CONFIRMED} hx-confirm="{confirm}"'
            items.append(self._button("delete", self._delete.for_episode(episode_id), "danger", extra))
        label = escape(self._menu_label % {"id": episode_id})
        return (
            f'<details class="row-menu"><summary aria-label="{label}">{self._buttons["menu"]}</summary>'
            f'<div class="row-menu-items">{"".join(items)}</div></details>'
        )

    def _button(self, action: str, url: str, css: str, extra: str = "") -> str:
        # Without JavaScript the button submits the row-actions form to `formaction`; with htmx it
        # posts the same form (its CSRF token and `next`) and swaps the row in place.
        return (
            f'<button type="submit" form="row-actions" formaction="{url}" class="{css}" hx-post="{url}" '
            f'hx-target="closest tr" hx-swap="outerHTML"{extra}>{self._buttons[action]}</button>'
        )

    def _undo_button(self, done: str, episode_id: str) -> str:
        """The Undo of an inline archive or restore: the opposite action, right beside its message."""
        url = (self._restore if UNDO[done] == "restore" else self._archive).for_episode(episode_id)
        label = escape(self._undo_label[done] % {"id": episode_id})
        return (
            f' <button type="submit" form="row-actions" formaction="{url}" class="link undo" hx-post="{url}" '
            f'hx-target="closest tr" hx-swap="outerHTML"{UNDO_FLAG} aria-label="{label}">{self._buttons["undo"]}</button>'
        )

    @staticmethod
    def _content(content: str) -> str:
        # Truncator walks every character; text that fits (nearly all) needs no walk.
        return content if len(content) <= CONTENT_CHARS else truncatechars(content, CONTENT_CHARS)

    def _speaker(self, episode: Episode) -> str:
        name, sender_id = episode.sender_name, episode.sender_id
        if name and sender_id:
            return f'{escape(name)} <span class="muted">({escape(sender_id)})</span>'
        if name or sender_id:
            return escape(name or sender_id)
        return self._unknown

    def _pill(self, status: str) -> str:
        if status not in self._pills:
            self._pills[status] = status_pill(status)
        return self._pills[status]

    def _score(self, hit: Any) -> str:
        breakdown = render_to_string("console/_score_breakdown.html", {"breakdown": hit.breakdown})
        return f'<div class="score"><strong>{escape(_("Score"))} {floatformat(hit.score, 3)}</strong>{breakdown}</div>'


def episode_table(
    scope_pk: int, permissions: dict[str, bool], episodes: Sequence[Episode] = (), hits: Sequence[Any] = ()
) -> dict[str, Any]:
    """The context of _episode_table.html: the rendered `rows`, the column `labels`, and
    `row_actions` (whether the user may act on rows at all, which adds the select column)."""
    renderer = RowRenderer(scope_pk, permissions["can_operate"], permissions["can_delete"])
    return {"rows": renderer.rows(episodes, hits), "labels": renderer.labels, "row_actions": renderer.actions}


def episode_row(
    scope_pk: int, permissions: dict[str, bool], episode: Episode, flash: str = "", undo: str = ""
) -> SafeString:
    """One row alone, for the row an htmx action re-renders in place (with its `flash` message and,
    after an archive or restore, `undo` naming it so the row offers its Undo)."""
    renderer = RowRenderer(scope_pk, permissions["can_operate"], permissions["can_delete"])
    return renderer.row(episode, flash=flash, undo=undo)
