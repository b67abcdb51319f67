"""What every JSON route shares (http_api.py's and features_api.py's): one error shape, a bounded body, and
FastAPI's validation errors as one message naming the field.

    400  the body is not JSON, or not a JSON object          413  the body is larger than MAX_BODY_BYTES
    415  the body is not sent as application/json            422  a value the request cannot use (the field named)
    503  the server's waiting work is full: Retry-After
"""
from __future__ import annotations

from collections.abc import Callable

import orjson
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from transformer.numbers import ascii_digits

MAX_BODY_BYTES = 64 * 1024  # a request's text is at most 2,000 characters: 12 bytes each, escaped, and room to spare


class ApiError(Exception):
    """A failure with its HTTP status and the field at fault."""

    def __init__(self, status: int, field: str | None, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers or {}


def error_response(error: ApiError) -> Response:
    return Response(orjson.dumps({"error": {"field": error.field, "message": error.message}}),
                    status_code=error.status, media_type="application/json", headers=error.headers)


class ErrorDetail(BaseModel):
    field: str | None = Field(description="the argument at fault, or null")
    message: str


class ErrorAnswer(BaseModel):
    error: ErrorDetail


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
        fields = next((list(kind.model_fields) for kind in self.endpoint.__annotations__.values()
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

        return route


async def bounded_body(request: HttpRequest) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and ascii_digits(declared) and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, None, f"the body has {int(declared):,} bytes; the limit is {MAX_BODY_BYTES:,}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, None, f"the body is over {MAX_BODY_BYTES:,} bytes, the limit")
    return bytes(body)
