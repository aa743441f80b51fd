"""What the provider said when it refused: its own error bodies, as our exceptions.

ProviderError                 any refusal or failure to answer; ``errors`` as the provider sent them
├── ProviderAuthError         401: expired, revoked or wrong access token (never retried)
├── ProviderRequestError      another 4xx: the request itself is wrong (never retried)
└── ProviderUnavailable       429, 5xx, timeouts and broken connections after the retries
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ProviderAuthError",
    "ProviderError",
    "ProviderErrorItem",
    "ProviderRequestError",
    "ProviderUnavailable",
]


@dataclass(frozen=True)
class ProviderErrorItem:
    """One entry of the provider's ``{"errors": [...]}`` body."""

    category: str
    code: str
    detail: str = ""
    field: str | None = None

    @classmethod
    def parse(cls, body: Any) -> list[ProviderErrorItem]:
        """The entries of an error body; none when the body is not the provider's form."""
        if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
            return []
        items = []
        for raw in body["errors"]:
            if isinstance(raw, dict):
                items.append(
                    cls(
                        category=str(raw.get("category", "")),
                        code=str(raw.get("code", "")),
                        detail=str(raw.get("detail", ""))[:500],
                        field=str(raw["field"]) if raw.get("field") is not None else None,
                    )
                )
        return items


class ProviderError(Exception):
    """The provider refused or did not answer; ``status`` is None when nothing came back."""

    def __init__(
        self, message: str, status: int | None = None, errors: list[ProviderErrorItem] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors or []

    @property
    def category(self) -> str | None:
        return self.errors[0].category if self.errors else None

    @property
    def code(self) -> str | None:
        return self.errors[0].code if self.errors else None

    def describe(self) -> str:
        """One line for a job's error or a log: status, category, code, detail (no secrets)."""
        head = f"{self.status}" if self.status is not None else "no answer"
        if self.errors:
            first = self.errors[0]
            return f"{head} {first.category}/{first.code}: {first.detail}".strip()
        return f"{head}: {self}"


class ProviderAuthError(ProviderError):
    """401: the access token is expired, revoked or wrong."""


class ProviderRequestError(ProviderError):
    """A 4xx other than 401 and 429: retrying would not help."""


class ProviderUnavailable(ProviderError):
    """Rate limited, failing or unreachable, still after the retries."""
