"""Re-exports farmkit.tasks, where ending owned tasks lives (docs/design.md section 2)."""

from farmkit.tasks import cancel_and_wait

__all__ = ["cancel_and_wait"]
