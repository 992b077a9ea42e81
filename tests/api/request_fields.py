"""Each endpoint's request fields and their kinds, read from the generated OpenAPI document, for the fuzzer."""

from __future__ import annotations

from typing import Any

from memconsole.api import site


def _kind(schema: dict[str, Any]) -> str:
    options = [option for option in schema.get("anyOf", [schema]) if option.get("type") != "null"]
    option = options[0]
    if option.get("format") == "date-time":
        return "datetime"
    if "$ref" in option or option.get("type") == "object":
        return "object"
    if option.get("type") == "array":
        return "strings"
    return "integer" if option.get("type") == "integer" else "string"


def _fields(name: str) -> dict[str, str]:
    schema = site.document()["components"]["schemas"][name]
    return {field: _kind(details) for field, details in schema["properties"].items()}


def _query_fields(path: str) -> dict[str, str]:
    parameters = site.document()["paths"][path]["get"]["parameters"]
    return {parameter["name"]: _kind(parameter["schema"]) for parameter in parameters}


REMEMBER_FIELDS = _fields("RememberRequest")
RECALL_FIELDS = _fields("RecallRequest")
PROFILE_QUERY_FIELDS = _query_fields("/profile")
PROFILE_UPDATE_FIELDS = _fields("ProfileUpdateRequest")
FORGET_FIELDS = _fields("ForgetRequest")
INJECT_FIELDS = _fields("InjectRequest")
