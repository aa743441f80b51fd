"""The security headers of every HTML page the services serve (the web app at ``/``, the API
docs at ``/api/v1/docs``): a strict Content-Security-Policy, no framing, no sniffing.

Scripts and styles come from this origin only; a page with inline blocks names each by its
SHA-256 hash (CSP level 2), so nothing else inline runs even on that page.
"""

from __future__ import annotations

import base64
import hashlib
import re

__all__ = ["content_security_policy", "inline_hashes", "security_headers"]

_INLINE = {
    "script": re.compile(r"<script>(.*?)</script>", re.DOTALL),
    "style": re.compile(r"<style>(.*?)</style>", re.DOTALL),
}


def inline_hashes(page: str, tag: str) -> tuple[str, ...]:
    """The CSP sources (``'sha256-...'``) of the page's inline ``<script>`` or ``<style>``
    blocks, hashed exactly as the browser hashes them (the text between the tags)."""
    return tuple(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE[tag].findall(page)
    )


def content_security_policy(scripts: tuple[str, ...] = (), styles: tuple[str, ...] = ()) -> str:
    """The policy: this origin's files, plus the given extra script and style sources."""
    return "; ".join(
        (
            "default-src 'none'",
            " ".join(("script-src 'self'", *scripts)),
            " ".join(("style-src 'self'", *styles)),
            "img-src 'self' data:",
            "connect-src 'self'",
            "manifest-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def security_headers(policy: str) -> dict[str, str]:
    """The headers an HTML page is sent with, under ``policy``."""
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }
