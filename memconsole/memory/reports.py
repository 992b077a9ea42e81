"""The one way a report dataclass becomes JSON: `Report.as_dict()` and `Report.to_json()`.

Imports, the health check, reindex, key rotation, erasure and the audit chain check each answer
with a report dataclass that mixes in `Report`. Its JSON keys are the dataclass fields in their
order, unless the class names them in `JSON_KEYS` (to add computed values: a property or a method
taking no argument, or to put the keys in another order). A method `json_<key>()` gives a key's
value when it is not the attribute itself; returning `OMIT` leaves the key out. Values become JSON
types in one place (`jsonable`): nested reports and dataclasses, mappings, sequences, and datetimes
as ISO 8601 strings.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, ClassVar


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (dicts, lists, strings, numbers, booleans, None)."""
    if isinstance(value, Report):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


class Report:
    """Mixin for report dataclasses (see the module docstring)."""

    JSON_KEYS: ClassVar[tuple[str, ...]] = ()
    # Set by @dataclass on the subclass (declared here so type checkers see a dataclass).
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON data, its keys in order (see the module docstring)."""
        keys = self.JSON_KEYS or tuple(f.name for f in dataclasses.fields(self))
        out: dict[str, Any] = {}
        for key in keys:
            custom = getattr(self, f"json_{key}", None)
            value = custom() if custom is not None else getattr(self, key)
            if callable(value):
                value = value()
            if value is not OMIT:
                out[key] = jsonable(value)
        return out

    def to_json(self, **dumps: Any) -> str:
        """The report as JSON text (non-ASCII kept as is); `dumps` go to `json.dumps` (e.g. `indent=2`)."""
        return json.dumps(self.as_dict(), ensure_ascii=False, **dumps)
