"""``farm-cloud``: the only place that reads the environment (composition root)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from cloud.app import create_app
from cloud.settings import CloudSettings
from cloud.store.migrations import migrate
from protocol.http.server import ListenError, serve_until_stopped

__all__ = ["main"]

log = logging.getLogger(__name__)


def _settings() -> CloudSettings:
    try:
        return CloudSettings()  # required fields come from CLOUD_* variables
    except ValidationError as err:
        lines = []
        for error in err.errors():
            field = ".".join(map(str, error["loc"]))
            name = f"CLOUD_{field.upper()}" if field else "settings"
            lines.append(f"  {name}: {error['msg']}")
        sys.exit("Invalid cloud settings:\n" + "\n".join(lines))


def _migrate(settings: CloudSettings) -> None:
    applied = asyncio.run(
        migrate(
            settings.owner_dsn.get_secret_value(), io_timeout=max(60.0, settings.db_io_timeout_s)
        )
    )
    if applied:
        log.info("applied migrations %s", ", ".join(f"{v:04d}" for v in applied))
    else:
        log.info("database schema is up to date")


def _serve(settings: CloudSettings) -> None:
    app = create_app(settings)
    try:
        asyncio.run(
            serve_until_stopped(
                app,
                host=settings.host,
                port=settings.port,
                announce=lambda url: log.info("farm-cloud listening on %s", url),
            )
        )
    except ListenError as err:
        sys.exit(f"farm-cloud: {err}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``farm-cloud`` console script."""
    parser = argparse.ArgumentParser(
        prog="farm-cloud",
        description="Vertical farm cloud service; configured by CLOUD_* environment variables",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply database migrations with CLOUD_OWNER_DSN")
    commands.add_parser("run", help="apply migrations, then serve the API")
    args = parser.parse_args(argv)
    settings = _settings()
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    _migrate(settings)
    if args.command == "run":
        _serve(settings)


if __name__ == "__main__":
    main()
