"""Clients of the provider for a configuration's environment, sharing one HTTP session."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from cloud.pos_provider.client import PosClient, RetryPolicy

__all__ = ["ProviderLinks", "ProviderUrls"]


@dataclass(frozen=True)
class ProviderUrls:
    """The provider's base URL per environment (operator settings, never a user's input: a
    configuration names an environment, so no caller can point the cloud at another host)."""

    sandbox: str
    production: str

    def of(self, environment: str) -> str:
        return self.production if environment == "production" else self.sandbox


class ProviderLinks:
    """Makes a :class:`PosClient` for an environment and a token."""

    def __init__(
        self, session: aiohttp.ClientSession, urls: ProviderUrls, retry: RetryPolicy
    ) -> None:
        self._session = session
        self._urls = urls
        self._retry = retry

    def client(self, environment: str, access_token: str) -> PosClient:
        """A client of ``environment``'s API acting with ``access_token``."""
        return PosClient(self._session, self._urls.of(environment), access_token, retry=self._retry)
