"""docs/grafana-dashboard.json only asks for metrics the agent and the cloud export."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = (ROOT / "docs" / "grafana-dashboard.json").read_text()
COLLECTOR = (ROOT / "agent" / "wiring" / "metrics.py").read_text()
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def _base(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


async def test_every_metric_on_the_dashboard_is_exported(agent):
    dashboard = json.loads(DASHBOARD)
    wanted = {
        _base(name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(farm_agent_\w+|process_\w+)", target["expr"])
    }
    # Sync figures appear once paired, MQTT message counts with MQTT enabled (the test agent
    # has neither): their names are checked in the collector's source instead.
    paired_only = {
        n for n in wanted if n.startswith(("farm_agent_sync_", "farm_agent_mqtt_messages_"))
    }
    text = await (await agent.client.get("/metrics")).text()
    exported = {_base(m) for m in re.findall(r"^# TYPE (\w+)", text, re.MULTILINE)}
    assert wanted - paired_only <= exported, sorted(wanted - paired_only - exported)
    for name in paired_only:
        assert f'"{name.removeprefix("farm_agent_")}"' in COLLECTOR, name
