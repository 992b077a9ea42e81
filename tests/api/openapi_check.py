"""Validate a real API response against the served OpenAPI document (JSON Schema 2020-12)."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from memconsole.api import site as openapi


@cache
def _document() -> str:
    return json.dumps(openapi.document())


def _schema_for(method: str, endpoint: str, status: int) -> dict[str, Any] | None:
    doc = json.loads(_document())
    operation = doc["paths"].get(f"/{endpoint}", {}).get(method)
    if operation is None:  # a templated path: /snapshots/{snapshot_id}
        for path, operations in doc["paths"].items():
            if "{" in path and re.fullmatch(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)), f"/{endpoint}"):
                operation = operations.get(method)
    if operation is None or str(status) not in operation["responses"]:
        # Undocumented combinations (unknown paths, wrong methods): always the error envelope.
        return {"$ref": "#/components/schemas/Error"} if status >= 400 else None
    response = operation["responses"][str(status)]
    if "$ref" in response:
        response = doc["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    return response["content"]["application/json"].get("schema")


def assert_matches_openapi(method: str, endpoint: str, response: Any) -> Any:
    """Assert the response is JSON, documented for its status, and valid against its schema."""
    assert response.status_code < 500, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(response.content)
    if endpoint == "openapi.json":
        return body
    schema = _schema_for(method, endpoint, response.status_code)
    assert schema is not None, f"{method.upper()} /{endpoint} answered {response.status_code}, not documented"
    doc = json.loads(_document())
    validator = Draft202012Validator(
        {"components": doc["components"], "allOf": [schema]}, format_checker=FormatChecker()
    )
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    assert not errors, f"{method.upper()} /{endpoint} {response.status_code}: {errors[0].message} in {body}"
    return body
