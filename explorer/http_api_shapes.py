"""What every JSON route shares (http_api.py's and features_api.py's): one error shape, a bounded body, every text
of the body checked by the package's one Unicode rule (`JsonBody`), and FastAPI's validation and parse errors as one
message naming the field.

    400  the body is not JSON (not UTF-8, nested too deep, unreadable), or not a JSON object
    413  the body is larger than MAX_BODY_BYTES
    415  the body is not sent as application/json            422  a value the request cannot use (the field named)
    503  the server's waiting work is full: Retry-After
"""
from __future__ import annotations

import typing
from collections.abc import Callable

import orjson
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException

from transformer.numbers import ascii_digits
from transformer.unicode_text import TextError, check_text, unicode_problem

MAX_BODY_BYTES = 64 * 1024  # a request's text is at most 2,000 characters: 12 bytes each, escaped, and room to spare


class ApiError(Exception):
    """A failure with its HTTP status and the field at fault."""

    def __init__(self, status: int, field: str | None, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers or {}


def error_response(error: ApiError) -> Response:
    # the answer is UTF-8: a lone surrogate a message quotes is written as its escape, never a failure to answer
    field, message = (None if text is None else text.encode("utf-8", "backslashreplace").decode("utf-8")
                      for text in (error.field, error.message))
    return Response(orjson.dumps({"error": {"field": field, "message": message}}),
                    status_code=error.status, media_type="application/json", headers=error.headers)


class ErrorDetail(BaseModel):
    field: str | None = Field(description="the argument at fault, or null")
    message: str


class ErrorAnswer(BaseModel):
    error: ErrorDetail


class JsonBody(BaseModel):
    """A route's body: unknown keys refused, no value converted, and every text in it (a field, an item of a list,
    a key or value of an object) checked by the one Unicode rule (transformer/unicode_text.py) before a route reads
    it, named by its field."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*")
    @classmethod
    def valid_text(cls, value, info: ValidationInfo):
        pending = [value]
        while pending:  # by hand, not by recursion: a body may nest lists as deep as JSON's parser allows
            item = pending.pop()
            if isinstance(item, dict):
                pending += [*item.keys(), *item.values()]
            elif isinstance(item, (list, tuple)):
                pending += item
            elif isinstance(item, str):
                try:
                    check_text(info.field_name, item)
                except TextError as error:
                    raise PydanticCustomError("text", "{message}", {"message": str(error)}) from None
        return value


ERRORS = {status: {"model": ErrorAnswer, "description": what} for status, what in (
    (400, "the body is not a JSON object"), (413, "the body is too large"), (415, "the body is not sent as JSON"),
    (422, "a value the request cannot use; `field` names it"),
    (503, "the server is full: retry after the seconds in the Retry-After header"))}


def validation_error(error: RequestValidationError, fields=()) -> ApiError:
    """pydantic's first complaint about the body, as one message naming the field (`fields`: the body's)."""
    first = error.errors()[0]
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    field = location[0] if location else None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return ApiError(400, None, f"the body is not valid JSON: {first.get('msg', '')}".rstrip(": "))
    if kind == "text":
        return ApiError(422, field, first["msg"])
    if kind == "string_unicode" and field is None and isinstance(first.get("input"), str):  # a key of the body
        return ApiError(422, None, f"the body has a key that is not valid Unicode text: "
                                   f"{unicode_problem(first['input'])}; the fields are {sorted(fields)}")
    if field is None:
        return ApiError(400, None, "the body must be a JSON object, such as {\"text\": \"A dog runs.\"}")
    if kind == "missing":
        return ApiError(422, field, f"{field} is required")
    if kind == "extra_forbidden":
        return ApiError(422, field, f"unknown field {field!r}; the fields are {sorted(fields)}")
    got = type(first.get("input")).__name__ if "input" in first else "nothing"
    return ApiError(422, field, f"{'.'.join(location)}: {first.get('msg', 'invalid value')} (got {got})")


class JsonRoute(APIRoute):
    """A route whose every failure leaves as ApiError's shape: the body's size is bounded before it is read, and
    FastAPI's validation errors name the field."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        # the body's fields, for a message that lists them: the endpoint's one pydantic parameter
        fields = next((list(kind.model_fields) for kind in typing.get_type_hints(self.endpoint).values()
                       if isinstance(kind, type) and issubclass(kind, BaseModel)), [])

        async def route(request: HttpRequest) -> Response:
            try:
                if request.method == "POST":
                    kind = request.headers.get("content-type", "")
                    if kind.split(";")[0].strip().lower() != "application/json":
                        raise ApiError(415, None, "send the body as JSON, with the header Content-Type: "
                                                  f"application/json (got {kind[:60]!r})")
                    request._body = await bounded_body(request)  # noqa: SLF001  (FastAPI reads it from there)
                return await handler(request)
            except ApiError as error:
                return error_response(error)
            except RequestValidationError as error:
                return error_response(validation_error(error, fields))
            except HTTPException as error:  # FastAPI's own: a body it could not parse as JSON
                return error_response(parse_error(error))

        return route


def parse_error(error: HTTPException) -> ApiError:
    """FastAPI's HTTPException, in the one shape: its 400 for a body it could not parse says why, from the error
    that caused it (bytes that are not UTF-8, JSON nested deeper than Python's parser goes)."""
    cause = error.__cause__
    if error.status_code != 400:
        return ApiError(error.status_code, None, str(error.detail), dict(error.headers or {}))
    if isinstance(cause, UnicodeDecodeError):
        return ApiError(400, None, f"the body is not valid {cause.encoding.upper()} text: byte {cause.start + 1} "
                                   f"is 0x{cause.object[cause.start]:02X}; send JSON encoded as UTF-8")
    if isinstance(cause, RecursionError):
        return ApiError(400, None, "the body's JSON is nested too deeply to read; send a flat JSON object")
    return ApiError(400, None, f"the body could not be read as JSON ({type(cause or error).__name__})")


async def bounded_body(request: HttpRequest) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and ascii_digits(declared) and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, None, f"the body has {int(declared):,} bytes; the limit is {MAX_BODY_BYTES:,}")
    body, chunks = bytearray(), request.stream()
    while len(body) <= MAX_BODY_BYTES:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return bytes(body)
        except Exception as error:  # the client's stream broke off or failed: nothing of it can be read
            raise ApiError(400, None, f"the body could not be read to its end ({type(error).__name__})") from error
        body += chunk
    raise ApiError(413, None, f"the body is over {MAX_BODY_BYTES:,} bytes, the limit")
