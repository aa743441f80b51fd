"""``farm-agent``: the only place that reads the environment (composition root)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import SettingsError

from agent.app import create_app
from agent.ops import commands as ops_commands
from agent.ops.doctor import diagnose, render
from agent.ops.install import InstallError, install, uninstall
from agent.ops.serve import StartupFailed, serve
from agent.ops.systemd_notify import notifier_from_environment, watchdog_interval
from agent.process_memory import periodic_trim, tune_malloc
from agent.settings import AgentSettings
from agent.sync.pairing import PairingFailed, pair
from agent.web.keys import HEALTH as HEALTH_KEY
from farmkit.logs import configure_logging
from farmkit.startup_heap import freeze_startup_objects
from protocol.version import distribution_version

__all__ = ["main"]

_GIL_SWITCH_INTERVAL_S = 0.0005


def _settings(overrides: dict[str, object]) -> AgentSettings:
    """The settings, or exit with one line naming every bad one."""
    try:
        return AgentSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as err:
        problems = "; ".join(
            f"{_variable(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors()
        )
        sys.exit(f"farm-agent: invalid settings: {problems}")
    except (SettingsError, tomllib.TOMLDecodeError) as err:  # unparseable value or TOML file
        sys.exit(f"farm-agent: invalid settings: {err}")


def _variable(loc: tuple[int | str, ...]) -> str:
    """The environment variable a validation error is about."""
    name = ".".join(map(str, loc))
    return f"FARM_{name.upper()}" if name else "settings"


def _run(args: argparse.Namespace) -> None:
    overrides: dict[str, object] = {}
    if args.state_dir:
        overrides["state_dir"] = args.state_dir
    if args.port:
        overrides["port"] = args.port
    if args.host:
        overrides["host"] = args.host
    if args.sample_data:
        overrides["sample_data"] = True
    if args.simulate:
        overrides["simulate_devices"] = True
    settings = _settings(overrides)
    tune_malloc()
    # The SQLite connections run on their own threads: a statement that finished waits for the
    # GIL until the busy event loop yields it, 5 ms by default; at 0.5 ms a write request's
    # savepoint and commit no longer queue behind whole slices of HTTP work.
    sys.setswitchinterval(_GIL_SWITCH_INTERVAL_S)
    configure_logging(settings.log_level, settings.log_format)

    first_admin: list[str] = []

    def announce(line: str) -> None:
        if line.startswith("First admin:"):
            first_admin.append(line)
        print(line, flush=True)

    app = create_app(settings, announce=announce)

    def show_urls(urls: list[str]) -> None:
        """Once the socket is open: where the agent answers, and how to sign in."""
        for url in urls:
            announce(f"Farm agent listening on {url}")
        announce(f"API docs: {urls[0]}api/v1/docs")
        # The last lines say where to point a browser and how to sign in.
        announce(f"Web app: {urls[-1]}")  # a LAN address when there is one: for the tablets
        if first_admin:
            announce("Sign in: " + first_admin[-1].removeprefix("First admin: "))
        else:
            announce(
                f"Sign in as {settings.admin_email} with the password printed when the"
                " database was created (or FARM_ADMIN_PASSWORD)"
            )

    app.on_startup.append(freeze_startup_objects)
    app.cleanup_ctx.append(periodic_trim(settings.memory_trim_interval_s))
    notifier = notifier_from_environment(os.environ)
    notifier.status("Starting: opening the database")
    try:
        asyncio.run(
            serve(
                app,
                host=settings.host,
                port=settings.port,
                notifier=notifier,
                watchdog_s=watchdog_interval(os.environ),
                # Called only once start-up is complete, when the health service exists.
                problem=lambda: app[HEALTH_KEY].problem(),
                status=lambda: app[HEALTH_KEY].summary(),
                on_listening=show_urls,
            )
        )
    except StartupFailed as err:
        sys.exit(f"farm-agent: start-up failed: {err}")


def _pair(args: argparse.Namespace) -> None:
    settings = _settings(_state_overrides(args))
    if not settings.database_path.is_file():
        # Pairing a state no agent runs on used the one-time code up for nothing.
        sys.exit(_no_agent_state(settings.state_dir))
    try:
        link = asyncio.run(pair(args.cloud, args.code, settings.state_dir))
    except PairingFailed as err:
        sys.exit(f"Pairing failed: {err}")
    print(
        f"Paired with {link.cloud_url} as agent {link.agent_id}; the agent running on"
        f" {settings.state_dir} starts syncing within seconds (no restart needed)."
    )


def _no_agent_state(state_dir: Path) -> str:
    """Why ``pair`` refuses a directory without an agent's database, and where one is."""
    elsewhere = sorted(
        path.parent.name for path in Path.cwd().glob("*/agent.db") if path.parent != state_dir
    )
    hint = (
        f"; here {', '.join(elsewhere)} holds one: add --state-dir {elsewhere[0]}"
        if elsewhere
        else ": pass the running agent's --state-dir (or FARM_STATE_DIR)"
    )
    return (
        f"farm-agent pair: no agent state in {state_dir.absolute()} (no agent.db; the code was"
        f" not used){hint}"
    )


def _state_overrides(args: argparse.Namespace) -> dict[str, object]:
    return {"state_dir": args.state_dir} if args.state_dir else {}


def _backup(args: argparse.Namespace) -> None:
    settings = _settings(_state_overrides(args))
    try:
        print(ops_commands.backup(settings, Path(args.path), distribution_version()))
    except ops_commands.CommandFailed as err:
        sys.exit(str(err))


def _restore(args: argparse.Namespace) -> None:
    settings = _settings(_state_overrides(args))
    try:
        print(ops_commands.restore(settings, Path(args.path)))
    except ops_commands.CommandFailed as err:
        sys.exit(str(err))


def _doctor(args: argparse.Namespace) -> None:
    findings = asyncio.run(diagnose(_settings(_state_overrides(args))))
    print(render(findings))
    failed = [item.check for item in findings if item.status == "fail"]
    if failed:
        sys.exit(f"doctor: {len(failed)} problem(s) to fix: {', '.join(failed)}")


def _installed_executable() -> Path:
    beside = Path(sys.executable).with_name("farm-agent")
    return beside if beside.is_file() else Path(sys.argv[0]).absolute()


def _install(args: argparse.Namespace) -> None:
    try:
        done = install(Path(args.root), _installed_executable(), start=not args.no_start)
    except InstallError as err:
        sys.exit(f"Install failed: {err}")
    print("\n".join(done))


def _uninstall(args: argparse.Namespace) -> None:
    try:
        print("\n".join(uninstall(Path(args.root))))
    except InstallError as err:
        sys.exit(f"Uninstall failed: {err}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``farm-agent`` console script."""
    parser = argparse.ArgumentParser(prog="farm-agent", description="Vertical farm edge agent")
    parser.add_argument("--version", action="version", version=distribution_version())
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run the agent (default)")
    for target in (parser, run):
        target.add_argument("--state-dir", help="directory for the database and keys")
        target.add_argument("--host", help="listen address")
        target.add_argument("--port", type=int, help="listen port")
        target.add_argument(
            "--sample-data",
            action="store_true",
            help="create a sample farm hierarchy on an empty database",
        )
        target.add_argument(
            "--simulate",
            action="store_true",
            help="demo: simulated devices on the first farm (on a private Mosquitto unless"
            " FARM_MQTT_HOST or FARM_MQTT_PORT names a broker)",
        )
    pair = commands.add_parser(
        "pair", help="pair this agent (its state directory, the one it runs on) with a cloud"
    )
    pair.add_argument("--cloud", required=True, help="the cloud's base URL")
    pair.add_argument("--code", required=True, help="the one-time pairing code from an admin")
    pair.add_argument(
        "--state-dir", help="the state directory of the agent to pair (as it runs: FARM_STATE_DIR)"
    )
    backup = commands.add_parser(
        "backup", help="write a backup (consistent while the agent runs) to PATH"
    )
    backup.add_argument("path", help="the archive to write, or a directory to write it in")
    backup.add_argument("--state-dir", help="directory for the database and keys")
    restore = commands.add_parser(
        "restore", help="restore a backup (the agent must be stopped; the current state is kept)"
    )
    restore.add_argument("path", help="a backup archive written by farm-agent backup")
    restore.add_argument("--state-dir", help="directory for the database and keys")
    setup = commands.add_parser(
        "install", help="as root: system user, systemd unit, /etc/farm-agent/agent.toml; enable"
    )
    setup.add_argument("--root", default="/", help="install into this directory tree instead")
    setup.add_argument("--no-start", action="store_true", help="enable, but do not start now")
    remove = commands.add_parser(
        "uninstall", help="as root: stop and remove the service; keeps data, settings and user"
    )
    remove.add_argument("--root", default="/", help="uninstall from this directory tree instead")
    doctor = commands.add_parser("doctor", help="check this site and say what to fix")
    doctor.add_argument("--state-dir", help="directory for the database and keys")
    args = parser.parse_args(argv)
    handlers = {
        "doctor": _doctor,
        "pair": _pair,
        "backup": _backup,
        "restore": _restore,
        "install": _install,
        "uninstall": _uninstall,
    }
    handlers.get(args.command, _run)(args)


if __name__ == "__main__":
    main()
