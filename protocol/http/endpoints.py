"""Declared endpoints: one decorator documents a handler and parses its input.

A handler receives validated models and returns a model (or ``None`` for 204), so the OpenAPI
document generated from the same declarations (``protocol.http.openapi``) cannot drift from what
the handlers accept and answer.
"""

from __future__ import annotations

import json
import re
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from protocol.errors import (
    BadRequest,
    FieldIssue,
    PayloadTooLarge,
    Unauthorized,
    ValidationFailed,
)
from protocol.http.keys import AUTH_FAILURE, PRINCIPAL, PUBLIC_HANDLERS
from protocol.identity import Principal

__all__ = ["Api", "Endpoint", "issues_of", "parse_model", "principal_of", "read_json"]

Handler = Callable[..., Awaitable[BaseModel | web.StreamResponse | None]]
_PATH_PARAM = re.compile(r"{(\w+)}")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Endpoint:
    """One documented operation."""

    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    auth: bool = True
    errors: tuple[int, ...] = ()
    path_params: tuple[str, ...] = field(default=())
    shared_answers: bool = False
    """The handler answers models shared by many requests (a cache's): render each once."""
    path_patterns: Mapping[str, str] = field(default_factory=dict)
    """Path parameters that are not UUIDs (every other one is): name -> the regex it matches."""


def issues_of(error: ValidationError, prefix: str = "") -> list[FieldIssue]:
    """Turn a pydantic error into ``(field, issue)`` pairs with dotted field paths."""
    issues = []
    for item in error.errors(include_url=False):
        loc = ".".join(str(part) for part in item["loc"])
        name = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "body")
        issues.append((name, item["msg"]))
    return issues


def parse_model(model: type[M], data: Any, prefix: str = "") -> M:
    """Validate ``data`` into ``model`` or raise a 422 naming each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ValidationFailed.of(issues_of(err, prefix)) from None


async def read_json(request: web.Request) -> Any:
    """Read a JSON body: 400 for a wrong content type or malformed JSON, 413 when too large."""
    if request.content_type != "application/json":
        raise BadRequest("Content-Type must be application/json")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge() from None
    if not raw:
        raise BadRequest("Request body is empty")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest("Malformed JSON", {"reason": str(err)}) from None
    except RecursionError:  # ~1,000 nested arrays exhaust the parser's stack
        raise BadRequest("Malformed JSON", {"reason": "nested too deeply"}) from None


def _path_ids(
    request: web.Request, names: tuple[str, ...], patterns: Mapping[str, str]
) -> dict[str, str]:
    ids = {}
    issues = []
    for name in names:
        raw = request.match_info[name]
        pattern = patterns.get(name)
        if pattern is not None:
            if re.fullmatch(pattern, raw):
                ids[name] = raw
            else:
                issues.append((f"path.{name}", f"must match {pattern}"))
            continue
        try:
            ids[name] = str(uuid.UUID(raw))
        except ValueError:
            issues.append((f"path.{name}", "must be a UUID"))
    if issues:
        raise ValidationFailed.of(issues)
    return ids


# JSON of shared answers by model identity, each entry dropped with its model.
_RENDERED: dict[int, tuple[weakref.ref[BaseModel], bytes]] = {}


def _json_once(model: BaseModel) -> bytes:
    """``model``'s JSON, serialized on its first answer only (the model is never changed)."""
    key = id(model)
    known = _RENDERED.get(key)
    if known is not None and known[0]() is model:
        return known[1]
    body = model.model_dump_json().encode()
    _RENDERED[key] = (weakref.ref(model, lambda _: _RENDERED.pop(key, None)), body)
    return body


def render(
    result: BaseModel | web.StreamResponse | None, status: int, *, shared: bool = False
) -> web.StreamResponse:
    """Serialize a handler's result; a ``shared`` one (cached, answered to many requests) is
    serialized once for all of them."""
    if isinstance(result, web.StreamResponse):
        return result
    if result is None:
        return web.Response(status=204)
    body = _json_once(result) if shared else result.model_dump_json().encode()
    return web.Response(body=body, status=status, content_type="application/json")


class Api:
    """A set of endpoints declared with decorators and installed on an application."""

    def __init__(self) -> None:
        self.endpoints: list[Endpoint] = []

    def route(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        tag: str,
        body: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        status: int = 200,
        auth: bool = True,
        errors: tuple[int, ...] = (),
        shared_answers: bool = False,
        path_patterns: Mapping[str, str] | None = None,
    ) -> Callable[[Handler], Handler]:
        """Declare ``handler`` as ``method path``; ``shared_answers`` when it answers the same
        (cached, never changed) model to many requests, so its JSON is rendered once;
        ``path_patterns`` for path parameters that are not UUIDs (a hub's ids)."""

        def register(handler: Handler) -> Handler:
            params = tuple(_PATH_PARAM.findall(path))
            self.endpoints.append(
                Endpoint(
                    method,
                    path,
                    handler,
                    summary,
                    tag,
                    body,
                    query,
                    response,
                    status,
                    auth,
                    errors,
                    params,
                    shared_answers,
                    dict(path_patterns or {}),
                )
            )
            return handler

        return register

    def extend(self, other: Api) -> None:
        """Add another set's endpoints to this one."""
        self.endpoints.extend(other.endpoints)

    def install(self, app: web.Application) -> None:
        """Add every endpoint to ``app``'s router."""
        public = app.setdefault(PUBLIC_HANDLERS, set())
        for endpoint in self.endpoints:
            handler = _adapter(endpoint)
            if not endpoint.auth:
                public.add(handler)
            app.router.add_route(endpoint.method, endpoint.path, handler)
            # docs/design.md section 3: "/farms and /farms/ both answer, without a redirect".
            twin = endpoint.path[:-1] if endpoint.path.endswith("/") else endpoint.path + "/"
            app.router.add_route(endpoint.method, twin, handler)


def _adapter(endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        if endpoint.auth and request.get(PRINCIPAL) is None:
            raise request.get(AUTH_FAILURE) or Unauthorized()
        kwargs: dict[str, Any] = _path_ids(request, endpoint.path_params, endpoint.path_patterns)
        if endpoint.query is not None:
            kwargs["query"] = parse_model(endpoint.query, _query_dict(request.query), "query")
        if endpoint.body is not None:
            kwargs["body"] = parse_model(endpoint.body, await read_json(request))
        result = await endpoint.handler(request, **kwargs)
        return render(result, endpoint.status, shared=endpoint.shared_answers)

    handle.__name__ = endpoint.handler.__name__
    return handle


def _query_dict(query: Mapping[str, str]) -> dict[str, str]:
    return {key: query[key] for key in query}


def principal_of(request: web.Request) -> Principal:
    """The authenticated caller of ``request`` (401 if there is none)."""
    principal: Principal | None = request.get(PRINCIPAL)
    if principal is None:
        raise Unauthorized()
    return principal
