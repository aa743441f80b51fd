"""The overview's placement and band rules, shared by agent and cloud (protocol/overview.py)."""

from __future__ import annotations

from datetime import date

from protocol.overview import DeviceFacts, LatestValue, OverviewInputs, ShelfPlace, assemble
from protocol.schemas.overview import MetricBand

ROW, RACK = "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000b1"
SHELF = "00000000-0000-0000-0000-0000000000c1"
HOT, OK = "00000000-0000-0000-0000-0000000000d1", "00000000-0000-0000-0000-0000000000d2"


def _inputs(bands: dict[str | None, dict[str, MetricBand]]) -> OverviewInputs:
    return OverviewInputs(
        farm_id="00000000-0000-0000-0000-0000000000f1",
        as_of="2026-01-01T00:00:00.000Z",
        today=date(2026, 1, 1),
        layout=[ShelfPlace(ROW, "Row 1: lettuce", 1, RACK, "Rack 1", 1, SHELF, "S1", 1, None, 0)],
        devices=[
            DeviceFacts(OK, "ok", "sensor", "row 1", "online", None, None),
            DeviceFacts(HOT, "hot", "sensor", "S1", "online", None, None),
        ],
        latest=[
            LatestValue(HOT, "temperature", "°C", 27.0),
            LatestValue(OK, "temperature", "°C", 22.0),
        ],
        alerts=[],
        bands=bands,
    )


def test_a_reading_beyond_the_rows_band_marks_its_sensor_and_shelf() -> None:
    farm_band = {None: {"temperature": MetricBand(target=30, band=5)}}
    row_band = {ROW: {"temperature": MetricBand(target=22, band=2)}}
    overview = assemble(_inputs(farm_band | row_band), offline_limit=5, alert_limit=5)
    (shelf,) = overview.rows[0].racks[0].shelves
    (metric,) = shelf.metrics
    # "row 1" names the row "Row 1: lettuce": that sensor covers each shelf of the row.
    assert [s.name for s in shelf.sensors] == ["ok", "hot"]
    assert (metric.out_of_band, metric.sensor_id) == ([HOT], HOT)
    assert metric.band == row_band[ROW]["temperature"]
    assert (metric.min, metric.max, metric.mean) == (22.0, 27.0, 24.5)
    assert overview.counts.shelves_out_of_band == 1
    assert [s.name for s in overview.unplaced] == []


def test_without_a_band_nothing_is_out_of_band() -> None:
    overview = assemble(_inputs({}), offline_limit=5, alert_limit=5)
    assert overview.counts.shelves_out_of_band == 0
