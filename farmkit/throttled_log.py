"""Rate-limited logging for problems that can arrive in storms (bad payloads, unknown topics)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """Logs the first occurrence of each key, then at most once per interval with a count.

    A misbehaving device can publish thousands of bad messages a second; the log must stay
    readable and the SD card must not fill up, while the counters elsewhere stay exact.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1000,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._max_keys = max_keys
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: object) -> bool:
        """Log at WARNING unless ``key`` was logged within the interval; True if logged."""
        return self._log(logging.WARNING, key, message, args)

    def error(self, key: str, message: str, *args: object) -> bool:
        """Log at ERROR unless ``key`` was logged within the interval; True if logged."""
        return self._log(logging.ERROR, key, message, args)

    def exception(self, key: str, message: str, *args: object) -> bool:
        """Like error() with the current exception's traceback."""
        return self._log(logging.ERROR, key, message, args, exc_info=True)

    def _log(
        self,
        level: int,
        key: str,
        message: str,
        args: tuple[object, ...],
        exc_info: bool = False,
    ) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        if last is None and len(self._last) >= self._max_keys:
            # Bound memory when keys come from untrusted input (topics): forget the oldest.
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]
            self._suppressed.pop(oldest, None)
        suppressed = self._suppressed.pop(key, 0)
        self._last[key] = now
        if suppressed:
            message += " (%d similar suppressed)"
            args = (*args, suppressed)
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True
