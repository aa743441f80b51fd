"""Operations: a salvaged database reported, the room to write watched and made, WAL checkpoints,
daily backups."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from agent.ops.integrity import check_large_tables
from agent.ops.maintenance import Maintenance, MaintenancePolicy
from agent.ops.reclaim import Reclaimer
from agent.ops.storage import StorageWatch
from agent.settings import AgentSettings
from agent.store.farms import FarmStore
from agent.web.keys import DATABASE, EVENT_LOG, HEALTH, READINGS
from agent.wiring.context import CleanupContext
from agent.wiring.mail import smtp_settings
from agent.wiring.store import SALVAGE
from farmkit.smtp import mail_check
from protocol.version import distribution_version

__all__ = ["MAINTENANCE", "ops_context"]

log = logging.getLogger(__name__)

MAINTENANCE = web.AppKey("maintenance", Maintenance)


def ops_context(settings: AgentSettings) -> CleanupContext:
    """Report a salvage and run the upkeep chores for the application's lifetime."""

    async def ops(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        farms = FarmStore(db)

        async def notify(kind: str, severity: str, message: str, data: dict[str, object]) -> None:
            # A system event concerns every farm this agent runs.
            for farm_id in await farms.ids():
                app[EVENT_LOG].notice(farm_id, kind, data, severity=severity, message=message)

        report = app.get(SALVAGE)
        if report is not None:
            summary = (
                f"salvaged at {report.at}: {report.total_rows} rows kept;"
                f" damaged file in {report.quarantined}"
            )
            app[HEALTH].add_check("database_salvage", lambda: summary)
            await notify(
                "database_salvaged",
                "critical",
                "The database was damaged; its readable rows were salvaged",
                {
                    "quarantined": report.quarantined,
                    "rows": report.rows,
                    "damaged_spots": report.damaged_spots,
                    "problems": report.problems[:5],
                },
            )
        policy = MaintenancePolicy(
            disk_check_interval_s=settings.disk_check_interval_s,
            checkpoint_interval_s=settings.wal_checkpoint_interval_s,
            backup_dir=settings.backup_dir,
            backup_interval_s=settings.backup_interval_s,
            backup_keep=settings.backup_keep,
        )
        writer = app[READINGS].writer if READINGS in app else None
        storage = StorageWatch(
            db,
            settings.state_dir,
            watermark=settings.disk_low_free_bytes,
            reclaimer=Reclaimer(
                db, raw_after_days=settings.reclaim_raw_after_days, backup_dir=settings.backup_dir
            ),
            notify=notify,
            stalled=(lambda: writer.stalled_since) if writer is not None else lambda: None,
        )
        maintenance = Maintenance(
            db, settings.state_dir, policy, notify, storage, version=distribution_version()
        )
        # Its own check: a full disk is unhealthy, a low one degraded; never a watchdog problem
        # (the loop is alive, and a restart would not make room).
        app[HEALTH].add_check("disk", storage.check_line, storage.status)

        async def damaged(problems: list[str]) -> None:
            app[HEALTH].fault("database damaged: restart to salvage it")
            await notify(
                "database_damaged",
                "critical",
                "The database is damaged; the agent restarts to salvage it",
                {"problems": problems[:5]},
            )

        checking = asyncio.create_task(check_large_tables(db.path, damaged), name="integrity-check")
        smtp = smtp_settings(settings)
        if smtp is None:
            log.warning(
                "mail is not configured (FARM_SMTP_HOST): password reset and e-mail"
                " verification messages are not sent"
            )
        mail = mail_check(smtp)
        app[HEALTH].add_check("mail", lambda: mail)
        await maintenance.start()
        app[MAINTENANCE] = maintenance
        yield
        checking.cancel()
        await asyncio.gather(checking, return_exceptions=True)
        await maintenance.stop()

    return ops
