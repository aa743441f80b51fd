"""Re-exports farmkit.throttled_log, where rate-limited logging lives (docs/design.md section 2)."""

from farmkit.throttled_log import ThrottledLog

__all__ = ["ThrottledLog"]
