"""Log lines for the agent and the cloud: one line per event, text or JSON, with the request id
of the request being served, and secrets masked as a last line of defence.

The code never logs a secret on purpose (docs/operations.md, "Watching it"); the mask catches
what slips through in a library's message or an exception text: bearer tokens, JWTs, API keys
and ``password=...``-like pairs.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Literal

__all__ = ["REQUEST_ID", "configure_logging", "mask_secrets"]

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
"""The id of the request the current task serves (set by the request id middleware)."""

_SECRETS = (
    re.compile(r"eyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]*"),  # a JWT
    re.compile(r"(?i)(bearer\s+)[^\s,;\"']+"),
    re.compile(r"\bfk_[\w-]{8,}"),  # an API key (protocol.user_rules.API_KEY_PREFIX)
    re.compile(
        r"(?i)((?:password|passwd|secret|token|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',;}&]+"
    ),
)


def mask_secrets(text: str) -> str:
    """``text`` with anything shaped like a credential replaced by ``***``."""
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
    return text


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


def _utc(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _TextFormatter(logging.Formatter):
    """``time LEVEL logger [request id]: message``, tracebacks folded into the same line."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        request_id = getattr(record, "request_id", None)
        where = f" [{request_id}]" if request_id else ""
        line = f"{_utc(record)} {record.levelname} {record.name}{where}: {text}"
        return mask_secrets(line).replace("\n", "\\n")


class _JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": _utc(record),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = mask_secrets(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str, fmt: Literal["text", "json"] = "text") -> None:
    """Send every log record to stderr, one line each, in ``fmt``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # aiosqlite's DEBUG lines carry every statement's parameters (hashes, e-mail addresses).
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, root.level))
    # apscheduler says "Running job ..." and "executed successfully" at INFO for every run of every
    # periodic job; a failed run is still a WARNING/ERROR, and DEBUG shows everything.
    if root.level > logging.DEBUG:
        logging.getLogger("apscheduler").setLevel(max(logging.WARNING, root.level))
