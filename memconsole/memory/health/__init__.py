"""The health check: can this memory be trusted?

One run answers with `{status, checks: [{id, status, detail, fix?}], checked_at, duration_ms}`
(`HealthResult`), `status` being the worst of OK < WARN < ERROR, in this order of checks:

- configuration (`checks`): `database`, `vector_index` (reachable, a collection for every scope
  with episodes), `embedding` (the real model, or the lexical fallback: WARN);
- the isolation probe (`probe`, `cleanup`): `write` two canary episodes into two synthetic
  user_keys, then `search`, `list`, `get`, `recall`, `inject`, `export` and `delete` must each keep
  the two apart, and `cleanup` always removes them;
- integrity (`integrity`): `index_drift` (`reindex --check`), `index_backlog` (vectors waiting for the
  write-behind indexer, `backlog`), `audit_chain`, `row_integrity` (`tamper`), `encryption`.

Every run is stored (`HealthRun`, the newest `runner.HEALTH_RUNS_KEPT`) and audited as `health_check`.
"""

from __future__ import annotations

from ..scopes import PROBE_USER_KEY_PREFIX
from .cleanup import LEFTOVER_AGE
from .probe import PROBE_ACTOR, PROBE_BOT_UUID, PROBE_CHECKS, PROBE_SOURCE, SEARCH_TOP_K, Canaries, new_canaries
from .result import ERROR, EXIT_CODES, OK, SEVERITY, WARN, Check, HealthResult, worst
from .runner import CHECK_IDS, HEALTH_RUNS_KEPT, latest_runs, run_health_check

__all__ = [
    "CHECK_IDS",
    "ERROR",
    "EXIT_CODES",
    "HEALTH_RUNS_KEPT",
    "LEFTOVER_AGE",
    "OK",
    "PROBE_ACTOR",
    "PROBE_BOT_UUID",
    "PROBE_CHECKS",
    "PROBE_SOURCE",
    "PROBE_USER_KEY_PREFIX",
    "SEARCH_TOP_K",
    "SEVERITY",
    "WARN",
    "Canaries",
    "Check",
    "HealthResult",
    "latest_runs",
    "new_canaries",
    "run_health_check",
    "worst",
]
