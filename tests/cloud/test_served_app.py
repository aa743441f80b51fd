"""What ``farm-cloud run`` serves: the cloud's application, whose start-up heap is frozen once
everything has opened (as the agent's is)."""

from __future__ import annotations

from pathlib import Path

from cloud.cli import served_app
from cloud.settings import CloudSettings
from farmkit.startup_heap import freeze_startup_objects

DSN = "postgresql://nobody:nothing@127.0.0.1:1/none"  # never connected to: the app is not started


def test_the_served_cloud_freezes_its_start_up_heap_last(tmp_path: Path) -> None:
    settings = CloudSettings(
        owner_dsn=DSN, app_dsn=DSN, sync_dsn=DSN, signing_key_path=tmp_path / "key.pem"
    )
    app = served_app(settings)
    assert list(app.on_startup)[-1] is freeze_startup_objects  # after every resource opened
