"""Errors in Heat's JSON shape, so heatclient shows the message.

    {"explanation", "code", "title", "error": {"message", "type", "traceback": null}}

The middleware is the API's outermost boundary: Converge's typed errors map
to their status (invalid input 400, forbidden 403, not found 404, conflict 409, transient
503); anything else is logged and answered 500 without internals.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

from services.engine.api.views import json_response
from shared.errors import (
    ConflictError,
    Forbidden,
    InvalidInput,
    NotFound,
    PermanentError,
    TransientError,
)

log = structlog.get_logger(__name__)

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Request Entity Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}
_EXPLANATIONS = {
    400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document you requested.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    405: "The method is not allowed for this resource.",
    409: "There was a conflict when trying to complete your request.",
    413: "The request is larger than the server is willing to process.",
    429: "Too many requests of this kind are in progress; try again when one has finished.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    501: "Converge does not implement this part of the Heat API.",
    503: "The server is currently unavailable. Please try again later.",
}


def error_body(code: int, message: str, error_type: str) -> dict[str, object]:
    return {
        "explanation": _EXPLANATIONS.get(code, ""),
        "code": code,
        "title": _TITLES.get(code, "Error"),
        "error": {"message": message, "type": error_type, "traceback": None},
    }


def http_error(code: int, message: str, error_type: str) -> web.HTTPException:
    classes: dict[int, type[web.HTTPException]] = {
        400: web.HTTPBadRequest,
        401: web.HTTPUnauthorized,
        403: web.HTTPForbidden,
        404: web.HTTPNotFound,
        409: web.HTTPConflict,
        501: web.HTTPNotImplemented,
    }
    exc_class = classes.get(code, web.HTTPBadRequest)
    return exc_class(text=json.dumps(error_body(code, message, error_type)), content_type="application/json")


def too_large(message: str, *, limit: int, size: int) -> web.HTTPException:
    """413 in Heat's shape: a body over a limit (refused before it is read in full)."""
    return web.HTTPRequestEntityTooLarge(
        max_size=limit,
        actual_size=size,
        text=json.dumps(error_body(413, message, "RequestEntityTooLarge")),
        content_type="application/json",
    )


def too_many(message: str) -> web.HTTPException:
    """429 in Heat's shape: a per-token limit on something held open."""
    return web.HTTPTooManyRequests(
        text=json.dumps(error_body(429, message, "TooManyRequests")), content_type="application/json"
    )


def not_found(message: str) -> web.HTTPException:
    return http_error(404, message, "EntityNotFound")


def bad_request(message: str, error_type: str = "HTTPBadRequest") -> web.HTTPException:
    return http_error(400, message, error_type)


def unauthorized(message: str) -> web.HTTPException:
    return http_error(401, message, "Unauthorized")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise
        body = error_body(
            exc.status,
            exc.reason if not exc.text or exc.text.startswith(str(exc.status)) else exc.text,
            type(exc).__name__,
        )
        return json_response(
            body, status=exc.status, headers={k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        )
    except NotFound as exc:
        return json_response(error_body(404, str(exc), type(exc).__name__), status=404)
    except Forbidden as exc:
        return json_response(error_body(403, str(exc), type(exc).__name__), status=403)
    except InvalidInput as exc:
        return json_response(error_body(400, str(exc), type(exc).__name__), status=400)
    except ConflictError as exc:
        return json_response(error_body(409, str(exc), type(exc).__name__), status=409)
    except TransientError as exc:
        log.warning("api_unavailable", path=request.path, error=str(exc))
        return json_response(error_body(503, str(exc), type(exc).__name__), status=503)
    except PermanentError as exc:
        return json_response(error_body(400, str(exc), type(exc).__name__), status=400)
    except Exception as exc:  # the API's outermost boundary: log it, never leak internals
        log.exception("api_error", path=request.path, method=request.method, error=repr(exc))
        return json_response(error_body(500, "Internal error", "InternalError"), status=500)
