"""One message to one contact point, through Apprise (ntfy, Telegram, Pushover, mail, Home
Assistant and 100+ services, each by URL) or, for a bare ``mailto:`` address, through the
configured SMTP server.

Every outcome is an :class:`Outcome`: ``ok`` when the service took the message, and ``answer``,
what it said (Apprise's own lines about this send, or the SMTP server's refusal). Nothing here
raises for the service's fault, and the URL (it holds tokens) never reaches a log or an answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import warnings
from dataclasses import dataclass
from email.message import EmailMessage
from types import ModuleType
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import aiosmtplib

from farmkit.smtp import SmtpSettings
from integrations.notify.message import Message

__all__ = ["ContactSender", "Outcome", "service_of", "url_problem"]

_MAX_ANSWER = 500
_BARE_MAILTO = re.compile(r"^mailto:([^/?#\s][^?#\s]*)$", re.IGNORECASE)
_ADDRESS = re.compile(r"^[^@\s,]+@[^@\s,]+\.[^@\s,]+$")
_NTFY = ("ntfy", "ntfys")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one send came to."""

    ok: bool
    answer: str


def _bare_mail_targets(url: str) -> list[str] | None:
    match = _BARE_MAILTO.match(url.strip())
    if match is None:
        return None
    return [part.strip() for part in match.group(1).split(",") if part.strip()]


def service_of(url: str) -> str:
    """The service a URL names (its scheme, lower case): what the API shows of it."""
    return url.split(":", 1)[0].strip().lower()


def url_problem(url: str) -> str | None:
    """Why a contact point URL cannot be used, or None."""
    targets = _bare_mail_targets(url)
    if targets is not None:
        if not targets or not all(_ADDRESS.match(t) for t in targets):
            return "mailto: needs one or more mail addresses, comma-separated"
        return None
    if "://" not in url:
        return "not an Apprise URL (service://...), nor mailto:address"
    if _apprise().Apprise.instantiate(url, suppress_exceptions=True) is None:
        return f"Apprise does not know how to send to this {service_of(url)}:// URL"
    return None


class _ThreadLines(logging.Handler):
    """Apprise's log lines, kept per thread: each send runs in a thread of its own, so the
    lines of one send are told apart from those of sends running beside it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._lines: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            self._lines[threading.get_ident()] = []

    def take(self) -> list[str]:
        with self._lock:
            return self._lines.pop(threading.get_ident(), [])

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            lines = self._lines.get(record.thread or 0)
            if lines is not None:
                lines.append(record.getMessage())


class _Forward(logging.Handler):
    """Apprise's warnings and errors, to this module's logger."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(__name__).handle(record)


_LINES = _ThreadLines()
_loading = threading.Lock()
_loaded: list[ModuleType] = []


def _apprise() -> ModuleType:
    """Apprise, imported and its service plugins loaded on first use (some 40 MB: an agent
    without contact points never pays it). Its plugins import modules that Python deprecates;
    that warning is Apprise's to fix, not ours to raise."""
    with _loading:
        if not _loaded:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                import apprise

                apprise.plugins.N_MGR.load_modules()  # type: ignore[no-untyped-call]
            # Its INFO lines are each send's answer (kept with the notification), not log lines
            # for the operator; its warnings still reach the log, as this module's.
            log = logging.getLogger("apprise")
            log.addHandler(_LINES)
            log.addHandler(_Forward())
            log.setLevel(logging.INFO)
            log.propagate = False
            _loaded.append(apprise)
        return _loaded[0]


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ANSWER else text[: _MAX_ANSWER - 3] + "..."


def _with_actions(url: str, message: Message) -> str:
    """ntfy opens the alert when the message is tapped (its ``click``) and shows an
    Acknowledge button that POSTs the signed link (its ``actions``)."""
    if service_of(url) not in _NTFY:
        return url
    extra = []
    if message.link is not None:
        extra.append(("click", message.link))
    if message.acknowledge_link is not None:
        extra.append(
            ("actions", f"http, Acknowledge, {message.acknowledge_link}, method=POST, clear=true")
        )
    if not extra:
        return url
    parts = urlsplit(url)
    names = {name for name, _ in extra}
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in names] + extra
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


class ContactSender:
    """Sends messages; ``smtp`` serves bare ``mailto:`` contact points (None: not configured).
    At most ``concurrency`` sends run at once (Apprise's services are called in threads)."""

    def __init__(self, smtp: SmtpSettings | None, *, concurrency: int = 8) -> None:
        self._smtp = smtp
        self._slots = asyncio.Semaphore(concurrency)

    async def send(self, url: str, message: Message) -> Outcome:
        """Send ``message`` to the contact point at ``url``; never raises for its fault."""
        async with self._slots:
            targets = _bare_mail_targets(url)
            if targets is not None:
                return await self._mail(targets, message)
            return await asyncio.to_thread(self._apprise, _with_actions(url, message), message)

    def _apprise(self, url: str, message: Message) -> Outcome:
        _LINES.start()
        ok = False
        try:
            # The service's plugin itself, called in this thread (not through Apprise's thread
            # pools), so that the lines it logs are this send's.
            plugin = _apprise().Apprise.instantiate(url, suppress_exceptions=True)
            if plugin is None:
                return Outcome(False, "Apprise does not know this URL")
            ok = bool(plugin.notify(body=message.body, title=message.title))
        except Exception as err:  # a plugin's own bug must not end the sender
            return Outcome(False, _short(f"{type(err).__name__}: {err}"))
        finally:
            lines = _LINES.take()
        said = " ".join(line.strip() for line in lines if line.strip())
        return Outcome(ok, _short(said or ("sent" if ok else "not sent")))

    async def _mail(self, targets: list[str], message: Message) -> Outcome:
        smtp = self._smtp
        if smtp is None:
            return Outcome(False, "no mail server configured (FARM_SMTP_HOST)")
        mail = EmailMessage()
        mail["From"] = smtp.sender
        mail["To"] = ", ".join(targets)
        mail["Subject"] = message.title
        mail.set_content(message.body)
        try:
            errors, answer = await aiosmtplib.send(
                mail,
                hostname=smtp.host,
                port=smtp.port,
                username=smtp.username,
                password=smtp.password,
                use_tls=smtp.security == "tls",
                start_tls=smtp.security == "starttls",
                timeout=smtp.timeout_s,
            )
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as err:
            return Outcome(False, _short(f"mail server {smtp.host}:{smtp.port}: {err}"))
        if errors:
            refused = "; ".join(f"{to}: {code} {text}" for to, (code, text) in errors.items())
            return Outcome(False, _short(f"refused {refused}"))
        return Outcome(True, _short(f"mail server {smtp.host}:{smtp.port}: {answer}"))
