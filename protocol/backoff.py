"""Re-exports farmkit.backoff, where the back-off rule lives (docs/design.md section 2)."""

from farmkit.backoff import Backoff, Retry

__all__ = ["Backoff", "Retry"]
