"""The docs page's security headers, checked the same way on the agent and the cloud."""

from __future__ import annotations

import base64
import hashlib
import re

from aiohttp.test_utils import TestClient

__all__ = ["assert_docs_page_headers"]


def _directives(policy: str) -> dict[str, str]:
    return {name: value for name, _, value in (part.partition(" ") for part in policy.split("; "))}


async def assert_docs_page_headers(client: TestClient) -> None:
    """``/api/v1/docs`` carries the web app's headers, and its CSP allows exactly its own inline
    script and style (by hash), nothing inline else."""
    app = await client.get("/")
    docs = await client.get("/api/v1/docs")
    page = await docs.text()
    for name in ("X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"):
        assert docs.headers.get(name) == app.headers[name], name
    assert docs.headers["X-Content-Type-Options"] == "nosniff"
    policy = _directives(docs.headers["Content-Security-Policy"])
    app_policy = _directives(app.headers["Content-Security-Policy"])
    for directive in ("default-src", "frame-ancestors", "form-action", "connect-src", "base-uri"):
        assert policy[directive] == app_policy[directive], directive
    assert "unsafe-inline" not in docs.headers["Content-Security-Policy"]
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.DOTALL)
        assert blocks, tag
        for body in blocks:
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in policy[directive].split(), tag
