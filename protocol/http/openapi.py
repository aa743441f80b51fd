"""OpenAPI 3.1 document generated from declared endpoints and their pydantic models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from protocol.http.endpoints import Api, Endpoint
from protocol.schemas.common import ErrorEnvelope

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_ERROR_TEXT = {
    400: "Bad request (malformed JSON, wrong content type)",
    401: "Missing, invalid or expired authentication",
    403: "Insufficient permissions",
    404: "Not found, or not visible to the caller",
    409: "Conflict: it already exists or its state forbids the change; on an agent paired"
    " with a cloud, MANAGED_BY_CLOUD: the change is made in the cloud",
    413: "Request body over 1 MiB",
    422: "Validation error",
    429: "Rate limit exceeded",
    502: "Upstream error",
    503: "Service unavailable",
    504: "Upstream timeout",
}


def _error_codes(endpoint: Endpoint) -> list[int]:
    codes = {429, *endpoint.errors}
    if endpoint.auth:
        codes.add(401)
    if endpoint.body is not None:
        codes.update({400, 413, 422})
    if endpoint.query is not None:
        codes.add(422)
    if endpoint.path_params:
        codes.update({404, 422})
    return sorted(codes)


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=_REF)
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def openapi_document(
    api: Api,
    *,
    title: str,
    version: str,
    description: str,
    extensions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the OpenAPI 3.1 document for ``api``; ``extensions`` are ``x-`` members added
    at the top level (the agent's WebSocket streams)."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorEnvelope, "serialization")]
    for endpoint in api.endpoints:
        if endpoint.body is not None:
            models.append((endpoint.body, "validation"))
        if endpoint.response is not None:
            models.append((endpoint.response, "serialization"))
    refs, defs = models_json_schema(list(dict.fromkeys(models)), ref_template=_REF)

    paths: dict[str, dict[str, Any]] = {}
    for endpoint in api.endpoints:
        operation: dict[str, Any] = {
            "operationId": endpoint.handler.__name__,
            "summary": endpoint.summary,
            "tags": [endpoint.tag],
            "parameters": [
                {
                    "name": name,
                    "in": "path",
                    "required": True,
                    "schema": (
                        {"type": "string", "pattern": endpoint.path_patterns[name]}
                        if name in endpoint.path_patterns
                        else {"type": "string", "format": "uuid"}
                    ),
                }
                for name in endpoint.path_params
            ],
            "responses": {},
        }
        if endpoint.query is not None:
            operation["parameters"].extend(_query_parameters(endpoint.query))
        if endpoint.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(endpoint.body, "validation")]}},
            }
        if endpoint.response is not None:
            operation["responses"][str(endpoint.status)] = {
                "description": "Success",
                "content": {
                    "application/json": {"schema": refs[(endpoint.response, "serialization")]}
                },
            }
        else:
            operation["responses"][str(endpoint.status)] = {"description": "No content"}
        error_schema = refs[(ErrorEnvelope, "serialization")]
        for code in _error_codes(endpoint):
            operation["responses"][str(code)] = {
                "description": _ERROR_TEXT.get(code, "Error"),
                "content": {"application/json": {"schema": error_schema}},
            }
        if endpoint.auth:
            operation["security"] = [{"bearerAuth": []}, {"apiKeyAuth": []}]
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation

    return {
        **(extensions or {}),
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "apiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
    }
