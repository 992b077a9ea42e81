"""How a request becomes input: body limits, strict JSON, and the schema check in the API's order.

`StrictJSONParser` is ninja's parser for the API: the size limit is checked before the body is read,
JSON is parsed strictly (no NaN or Infinity, no number out of range, no nesting deeper than
MAX_DEPTH) and no string may hold a lone surrogate (400) or a NUL (422). `JsonBody` and
`StrictQuery` are ninja's Body and Query with that parser's errors kept as they are (ninja's own
Body reads the whole body first and turns every parser error into one message) and with the order
of answers the API has always had: wrong types and unknown fields (400) before the scope (a
malformed one is 422, another bot's is 403), and the scope before any other rule (422).
"""

from __future__ import annotations

import json
import math
from typing import Any, cast, get_args

import pydantic
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, UnreadablePostError
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI
from ninja.params.models import BodyModel, QueryModel
from ninja.params.models import Param as NinjaParam
from ninja.parser import Parser
from pydantic.fields import FieldInfo

from .auth import scope_for
from .errors import ApiError, refusal

MAX_DEPTH = 16
SCOPE_FIELDS = ("bot_uuid", "session_name", "isolation")


def _reject_constant(name: str) -> Any:
    raise ApiError(400, "malformed_json", f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ApiError(400, "malformed_json", f"the number {text[:40]} is out of range")
    return number


def check_tree(data: Any) -> None:
    """Refuse deep nesting and strings that are not text (lone surrogates) or carry NUL."""
    stack: list[tuple[Any, int, str | None]] = [(data, 1, None)]
    while stack:
        value, depth, top = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(400, "invalid_body", f"JSON nested deeper than {MAX_DEPTH} levels", top)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ApiError(400, "invalid_body", "a string holds an invalid unicode escape", top) from None
            if "\x00" in value:
                raise ApiError(422, "invalid", "a string contains a NUL character", top)
        elif isinstance(value, dict):  # the field named as the validation names it: episodes[2].content
            for key, item in value.items():
                where = f"{top}.{key}" if top else str(key)
                stack.append((key, depth + 1, where))
                stack.append((item, depth + 1, where))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{top}[{i}]" if top else f"[{i}]") for i, item in enumerate(value))


def _chunked(request: HttpRequest) -> bool:
    """A body sent with Transfer-Encoding: chunked, which the server has already de-chunked.

    Such a request has no Content-Length, so Django's `request.body` reads nothing from it; the
    WSGI server then marks its input as ending where the body ends (`wsgi.input_terminated`).
    """
    return (
        "CONTENT_LENGTH" not in request.META
        and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        and bool(request.META.get("wsgi.input_terminated"))
    )


def _read_chunked(request: HttpRequest, limit: int) -> bytes:
    """A chunked body up to one byte over `limit` (enough to refuse it without reading all of it)."""
    try:
        data: bytes = request.META["wsgi.input"].read(limit + 1)
    except Exception as exc:  # the server's own error for broken chunks (gunicorn: InvalidChunkSize, ...)
        raise UnreadablePostError(str(exc)) from exc
    return data


def request_body(request: HttpRequest) -> bytes:
    """The request's body, chunked or not, checked against MEMCONSOLE_API_MAX_BODY_BYTES (by
    Content-Length before it is read, then by what was read); `ApiError` 400 or 413 otherwise.
    The JSON API and /mcp read bodies here."""
    limit = settings.MEMCONSOLE_API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number") from None
    if declared > limit:
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes")
    try:
        body = _read_chunked(request, limit) if _chunked(request) else request.body
    except RequestDataTooBig:  # Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) when it is the lower one
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes") from None
    except UnreadablePostError:
        raise ApiError(400, "bad_request", "the body could not be read (connection closed?)") from None
    if len(body) > limit:
        raise ApiError(413, "payload_too_large", f"the body is over {limit} bytes")
    return body


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        """The request body as a JSON object, after the size limit and strict parsing."""
        try:
            text = request_body(request).decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(400, "malformed_json", "the body is not UTF-8") from None
        if not text.strip():
            raise ApiError(400, "malformed_json", "the body is empty; send a JSON object")
        try:
            data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except ApiError:
            raise
        except RecursionError:
            raise ApiError(400, "invalid_body", f"JSON nested deeper than {MAX_DEPTH} levels") from None
        except json.JSONDecodeError as exc:
            raise ApiError(400, "malformed_json", f"malformed JSON: {exc}"[:300]) from None
        except ValueError:  # an integer over Python's digit limit: its own message names Python internals
            raise ApiError(400, "malformed_json", "a number in the body has too many digits") from None
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_body", "the body must be a JSON object")
        check_tree(data)
        return data

    def parse_querydict(
        self, data: MultiValueDict[str, Any], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        """Query-string parameters (the last value wins) under the same checks as a body."""
        params = {key: data.get(key) for key in data}
        check_tree(params)
        return params


def _validate(
    model: type[pydantic.BaseModel],
    request: HttpRequest,
    raw: dict[str, Any],
    data: Any,
    depth: int = 1,
    *,
    scoped: bool = True,
) -> Any:
    """`model` checks `data`; a 422 of a scoped request (one that names a chat, unlike a bot's list
    of sessions) is preceded by the scope's own refusal, if any."""
    try:
        return model.model_validate(data, context={"request": request})
    except pydantic.ValidationError as exc:
        error = refusal(exc, depth=depth)  # `depth`: the view's parameter, when it wraps the body
        if error.status == 422 and error.field not in SCOPE_FIELDS and scoped:
            scope_for(request, *(raw.get(name) for name in SCOPE_FIELDS))  # 422 or 403 first, as before
        raise error from None


class StrictBodyModel(BodyModel):
    @classmethod
    def resolve(cls, request: HttpRequest, api: NinjaAPI, path_params: dict[str, Any]) -> Any:
        raw = api.parser.parse_body(request)
        body = cls.model_fields[cls.__read_from_single_attr__].annotation
        scoped = "session_name" in getattr(body, "model_fields", SCOPE_FIELDS)  # a body that is no model: scoped
        return _validate(cls, request, raw, {cls.__read_from_single_attr__: raw}, scoped=scoped)


def chosen_schema(field: FieldInfo, raw: dict[str, Any]) -> type[pydantic.BaseModel]:
    """The schema of a tagged union (`Annotated[Annotated[A, Tag("a")] | ..., Discriminator(f)]`)
    that the discriminator picks for this body."""
    discriminator = next(mark for mark in field.metadata if isinstance(mark, pydantic.Discriminator))
    assert callable(discriminator.discriminator), "a body union is told apart by a function"
    tag = discriminator.discriminator(raw)
    for option in get_args(field.annotation):
        model, *marks = get_args(option)
        if any(isinstance(mark, pydantic.Tag) and mark.tag == tag for mark in marks):
            return cast(type[pydantic.BaseModel], model)
    raise LookupError(f"no schema is tagged {tag!r}")


class EitherBodyModel(StrictBodyModel):
    """A body that is one of a tagged union's schemas: the discriminator picks one and that schema
    alone checks the body, so an error names its field as that schema's own (`episodes[3].content`),
    not under the union's tag; the OpenAPI document shows the union as `oneOf`."""

    @classmethod
    def resolve(cls, request: HttpRequest, api: NinjaAPI, path_params: dict[str, Any]) -> Any:
        raw = api.parser.parse_body(request)
        name = cls.__read_from_single_attr__
        model = chosen_schema(cls.model_fields[name], raw)
        return {name: _validate(model, request, raw, raw, depth=0)}


class StrictQueryModel(QueryModel):
    @classmethod
    def resolve(cls, request: HttpRequest, api: NinjaAPI, path_params: dict[str, Any]) -> Any:
        raw = api.parser.parse_querydict(request.GET, [], request)
        known = getattr(cls, "__ninja_flatten_map__", {})
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ApiError(400, "unknown_field", f"unknown field {unknown[0]!r}"[:200], unknown[0][:200])
        return _validate(cls, request, raw, cls._map_data_paths(raw), scoped="session_name" in known)


class JsonBody(NinjaParam):  # type: ignore[misc]
    """ninja's Body, read by StrictJSONParser: `payload: Annotated[Schema, JsonBody(...)]`."""

    _model = StrictBodyModel

    @classmethod
    def _param_source(cls) -> str:
        return "body"


class JsonBodyEither(NinjaParam):  # type: ignore[misc]
    """JsonBody for a tagged union of schemas (`EitherBodyModel`): `POST /remember`'s one or many."""

    _model = EitherBodyModel

    @classmethod
    def _param_source(cls) -> str:
        return "body"


class StrictQuery(NinjaParam):  # type: ignore[misc]
    """ninja's Query, refusing unknown parameters: `params: Annotated[Schema, StrictQuery(...)]`."""

    _model = StrictQueryModel

    @classmethod
    def _param_source(cls) -> str:
        return "query"
