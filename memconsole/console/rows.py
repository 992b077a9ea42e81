"""The rows of the Episodes table, rendered in Python.

The Episodes page is the console's hottest screen (issue 7: a page of a million-episode scope in
a few milliseconds). Through the template engine, every row reversed five URLs, built two CSRF
tokens and ran three `{% blocktranslate %}`s, and cost more than all the page's queries together.
Like the result rows of Django's own admin changelist (`items_for_result`), they are built here
instead: each URL is reversed once per page and filled in per row, the labels are translated once
per page, every value is escaped, and the row actions are buttons of the page's one `row-actions`
form (in _episode_table.html, with its only CSRF token), each posting to its own `formaction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from django.template.defaultfilters import floatformat, truncatechars
from django.template.loader import render_to_string
from django.urls import reverse
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


class _UrlPattern:
    """One reversed URL split around the episode id: `for_episode` is a concatenation, not a reverse."""

    def __init__(self, name: str, scope_pk: int) -> None:
        self.prefix, self.suffix = reverse(name, args=[scope_pk, SAMPLE_ID]).rsplit(SAMPLE_ID, 1)

    def for_episode(self, episode_id: str) -> str:
        return escape(f"{self.prefix}{episode_id}{self.suffix}")


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
        self.labels = column_labels()
        self._label = {name: escape(text) for name, text in self.labels.items()}
        self._unknown = f'<span class="muted">{escape(_("unknown"))}</span>'
        self._buttons = {
            name: escape(text)
            for name, text in (("archive", _("Archive")), ("restore", _("Restore")), ("delete", _("Delete")))
        }
        self._read_only = f'<span class="muted">{escape(_("read only"))}</span>'
        # Translated once; per row only the id is filled in.
        self._select = _("Select episode %(id)s")
        self._confirm = {
            "archive": _("Archive episode %(id)s? It stays stored but is no longer recalled."),
            "restore": _("Restore episode %(id)s? It becomes active and is recalled again."),
            "delete": _("Delete episode %(id)s for good? This cannot be undone."),
        }
        self._pills: dict[str, str] = {}

    def rows(self, episodes: Sequence[Episode] = (), hits: Sequence[Any] = ()) -> list[SafeString]:
        """Rows of search `hits` (with their scores) when given, else of `episodes`."""
        if hits:
            return [self.row(hit.episode, hit) for hit in hits]
        return [self.row(episode) for episode in episodes]

    def row(self, episode: Episode, hit: Any = None, flash: str = "") -> SafeString:
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
        cells.append(f'<td data-label="{label["status"]}">{self._pill(status)}{flash_html}</td>')
        cells.append(f'<td class="actions">{self._actions(episode, status)}</td></tr>')
        return mark_safe("".join(cells))  # every value above is escaped

    def _actions(self, episode: Episode, status: str) -> str:
        if not self.actions:
            return self._read_only
        episode_id = episode.episode_id
        buttons = []
        if self.can_operate and status != Status.ARCHIVED:
            buttons.append(self._button("archive", self._archive.for_episode(episode_id), "secondary", episode_id))
        if self.can_operate and status != Status.ACTIVE:
            buttons.append(self._button("restore", self._restore.for_episode(episode_id), "secondary", episode_id))
        if self.can_delete:
            buttons.append(
                self._button("delete", self._delete.for_episode(episode_id), "danger", episode_id, CONFIRMED)
            )
        return " ".join(buttons)

    def _button(self, action: str, url: str, css: str, episode_id: str, extra: str = "") -> str:
        # Without JavaScript the button submits the row-actions form to `formaction`; with htmx it
        # posts the same form (its CSRF token and `next`) and swaps the row in place.
        confirm = escape(self._confirm[action] % {"id": episode_id})
        return (
            f'<button type="submit" form="row-actions" formaction="{url}" class="{css}" hx-post="{url}" '
            f'hx-target="closest tr" hx-swap="outerHTML"{extra} hx-confirm="{confirm}">{self._buttons[action]}</button>'
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


def episode_row(scope_pk: int, permissions: dict[str, bool], episode: Episode, flash: str = "") -> SafeString:
    """One row alone, for the row an htmx action re-renders in place (with its `flash` message)."""
    return RowRenderer(scope_pk, permissions["can_operate"], permissions["can_delete"]).row(episode, flash=flash)
