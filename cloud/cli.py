"""``farm-cloud``: the only place that reads the environment (composition root)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from cloud.app import create_app
from cloud.embedded.dev import DevCloud, DirectoryInUse
from cloud.embedded.postgres import PostgresCommandError, PostgresUnavailable
from cloud.pos_provider.fake import FakeMerchant, fake_app
from cloud.services.admins import AdminAccounts
from cloud.settings import CloudSettings
from cloud.store.db import Database
from cloud.store.migrations import migrate
from farmkit.logs import configure_logging
from farmkit.startup_heap import freeze_startup_objects
from protocol.errors import Conflict
from protocol.http.server import EnvelopeAppRunner, ListenError, listen

__all__ = ["main", "served_app"]

log = logging.getLogger(__name__)


def _announce(line: str) -> None:
    print(line, flush=True)


def _settings(overrides: dict[str, Any] | None = None) -> CloudSettings:
    try:
        return CloudSettings(**(overrides or {}))  # the rest from CLOUD_* variables
    except ValidationError as err:
        lines = []
        for error in err.errors():
            field = ".".join(map(str, error["loc"]))
            name = f"CLOUD_{field.upper()}" if field else "settings"
            lines.append(f"  {name}: {error['msg']}")
        sys.exit("Invalid cloud settings:\n" + "\n".join(lines))


def _logging(settings: CloudSettings) -> None:
    configure_logging(settings.log_level, settings.log_format)


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


def _serve(settings: CloudSettings, *, signin: str | None = None) -> None:
    try:
        asyncio.run(_serve_until_signal(settings, signin))
    except ListenError as err:  # the port is busy, the address is not ours
        sys.exit(f"farm-cloud: {err}")


def served_app(settings: CloudSettings) -> web.Application:
    """The application ``farm-cloud run`` serves: the cloud, and its start-up heap frozen once
    everything has opened (a process-wide setting, so not part of ``create_app``, which tests
    build many times in one process)."""
    app = create_app(settings, announce=_announce)
    app.on_startup.append(freeze_startup_objects)
    return app


async def _serve_until_signal(settings: CloudSettings, signin: str | None) -> None:
    """Serve until SIGINT or SIGTERM; the address is announced only once it is open."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    runner = EnvelopeAppRunner(served_app(settings), access_log=None, shutdown_timeout=10)
    try:
        await runner.setup()  # opens the database and makes the first admin
        urls = await listen(runner, settings.host, settings.port)
        for url in urls:
            _announce(f"Farm cloud listening on {url}")
        _announce(f"API docs: {urls[0]}api/v1/docs")
        if signin:
            _announce(signin)
        await stop.wait()
    finally:
        await runner.cleanup()


async def _create_admin(settings: CloudSettings, email: str, password: str | None) -> None:
    db = await Database.connect(
        settings.app_dsn.get_secret_value(),
        settings.sync_dsn.get_secret_value(),
        io_timeout=settings.db_io_timeout_s,
        min_size=1,
        max_size=2,
    )
    try:
        created = await AdminAccounts(db).create_admin(email, password)
    finally:
        await db.close()
    shown = created.generated_password or "(as given)"
    _announce(f"Admin: {created.email}  password: {shown}")


def _dev(args: argparse.Namespace) -> None:
    dev = DevCloud(Path(args.dir))
    try:
        database = asyncio.run(dev.start())
    except (PostgresUnavailable, PostgresCommandError, DirectoryInUse, OSError) as err:
        dev.stop()
        sys.exit(f"farm-cloud dev: the embedded PostgreSQL did not start: {err}")
    try:
        settings = _settings(
            {
                "owner_dsn": database.owner_dsn,
                "app_dsn": database.app_dsn,
                "sync_dsn": database.sync_dsn,
                "signing_key_path": dev.signing_key_path,
                "secret_key_path": dev.secret_key_path,
                "host": args.host,
                "port": args.port,
            }
        )
        _logging(settings)
        _announce(f"Embedded PostgreSQL in {dev.root} (stopped when this process ends)")
        email = settings.admin_email
        signin = (
            f"Sign in as {email} (password printed at its creation; "
            "`farm-cloud create-admin` adds another)"
            if email
            else None
        )
        _serve(settings, signin=signin)
    finally:
        dev.stop()


def _fake_pos(args: argparse.Namespace) -> None:
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    merchant = FakeMerchant.sample(args.token, orders=args.orders)

    async def show(_: web.Application) -> None:
        url = f"http://{args.host}:{args.port}"
        _announce(f"Fake POS provider on {url}/ (merchant {merchant.merchant_id})")
        _announce(f"Access token: {args.token}")
        _announce(f"Point the cloud at it: CLOUD_POS_SANDBOX_URL={url}")

    app = fake_app(merchant)
    app.on_startup.append(show)
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``farm-cloud`` console script."""
    parser = argparse.ArgumentParser(
        prog="farm-cloud",
        description="Vertical farm cloud service; configured by CLOUD_* environment variables",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply database migrations with CLOUD_OWNER_DSN")
    commands.add_parser("run", help="apply migrations, then serve the API")
    create = commands.add_parser(
        "create-admin", help="add an admin account (password generated and printed once)"
    )
    create.add_argument("--email", required=True, help="the new admin's e-mail address")
    create.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    dev = commands.add_parser(
        "dev", help="run the cloud on a private PostgreSQL in a local directory (trying it out)"
    )
    dev.add_argument("--dir", default=".cloud-dev", help="state directory (default .cloud-dev)")
    dev.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    dev.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    fake = commands.add_parser(
        "fake-pos", help="run the in-repo fake of the POS provider (try the integration)"
    )
    fake.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    fake.add_argument("--port", type=int, default=8010, help="listen port (default 8010)")
    fake.add_argument("--token", default="fake-token", help="the access token it accepts")
    fake.add_argument("--orders", type=int, default=25, help="sample orders (default 25)")
    args = parser.parse_args(argv)
    if args.command == "fake-pos":
        _fake_pos(args)
        return
    if args.command == "dev":
        _dev(args)
        return
    settings = _settings()
    _logging(settings)
    _migrate(settings)
    if args.command == "run":
        _serve(settings)
    elif args.command == "create-admin":
        password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
        try:
            asyncio.run(_create_admin(settings, args.email, password or None))
        except (Conflict, ValueError) as err:
            sys.exit(f"farm-cloud create-admin: {err}")


if __name__ == "__main__":
    main()
