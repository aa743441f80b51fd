"""What every resource shares: the transport, and turning keyword fields into a request model."""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from farm_client.transport import Transport
from protocol.schemas.common import ApiModel

__all__ = ["Id", "Resource", "body_of"]

Id = str | UUID
B = TypeVar("B", bound=ApiModel)


class Resource:
    """A collection of the API, reached through one :class:`Transport`."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport


def body_of(model: type[B], body: B | None, fields: dict[str, Any]) -> B:
    """``body`` as given, or ``fields`` validated by the protocol's request model.

    Validating here reports a mistake (unknown field, bad value) as a pydantic ValidationError
    before anything is sent, with the same rules the server applies.
    """
    if body is not None:
        if fields:
            raise TypeError("pass a request model or keyword fields, not both")
        return body
    return model(**fields)
