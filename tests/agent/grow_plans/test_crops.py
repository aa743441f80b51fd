"""The crop catalogue: shipped data, its validation, and GET /api/v1/crops."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.services.grow_plans.crop_catalogue import CatalogueError, load_catalogue
from tests.agent.hierarchy_helpers import assert_error, send
from tests.conftest import Agent

STAGE_KEYS = {"name", "days", "temperature", "humidity", "light_hours", "ppfd", "dli"}


async def test_crops_lists_the_catalogue_with_stages(agent: Agent) -> None:
    body = await send(agent, "GET", "/api/v1/crops?limit=500", expect=200)
    assert set(body) == {"crops", "total", "limit", "offset"}
    keys = {crop["key"] for crop in body["crops"]}
    assert {
        "lettuce_butterhead",
        "lettuce_romaine",
        "basil_genovese",
        "kale",
        "arugula",
        "spinach",
        "microgreens_pea",
        "microgreens_sunflower",
        "microgreens_radish",
        "strawberry",
        "cilantro",
        "mint",
    } <= keys
    assert body["total"] == len(body["crops"])
    lettuce = next(c for c in body["crops"] if c["key"] == "lettuce_butterhead")
    assert set(lettuce) == {"key", "name", "category", "source", "total_days", "stages"}
    assert lettuce["total_days"] == sum(stage["days"] for stage in lettuce["stages"])
    growth = lettuce["stages"][-1]
    assert set(growth) == STAGE_KEYS
    assert set(growth["temperature"]) == {"target", "band"}
    # DLI is derived from PPFD and photoperiod: 295 umol/m2/s for 16 h is about 17 mol/m2/d.
    assert growth["dli"] == pytest.approx(295 * 16 * 3600 / 1e6, abs=0.01)


async def test_crops_pages(agent: Agent) -> None:
    body = await send(agent, "GET", "/api/v1/crops?limit=2&offset=1", expect=200)
    assert len(body["crops"]) == 2
    assert body["limit"] == 2 and body["offset"] == 1 and body["total"] >= 12


async def test_crops_need_authentication(agent: Agent) -> None:
    resp = await agent.client.get("/api/v1/crops")
    assert resp.status == 401
    assert_error(await resp.json(), "UNAUTHORIZED")


def test_a_bad_catalogue_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "crops.toml"
    path.write_text(
        '[kale]\nname = "Kale"\ncategory = "brassicas"\nsource = "x"\nstages = [\n'
        '  { name = "growth", days = 0, temperature = { target = 19.0, band = 3.0 },'
        " humidity = { target = 65.0, band = 10.0 }, light_hours = 16, ppfd = 250 },\n]\n",
        encoding="utf-8",
    )
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(path)
    assert str(path) in str(caught.value)
    assert "kale.stages.0.days" in str(caught.value)


def test_a_crop_key_must_fit_a_shelf_species(tmp_path: Path) -> None:
    path = tmp_path / "crops.toml"
    path.write_text('["Big Kale"]\nname = "Kale"\n', encoding="utf-8")
    with pytest.raises(CatalogueError, match="Big Kale"):
        load_catalogue(path)


def test_unknown_fields_in_the_catalogue_are_refused(tmp_path: Path) -> None:
    shipped = load_catalogue()
    assert shipped.get("kale") is not None
    path = tmp_path / "crops.toml"
    path.write_text(
        '[kale]\nname = "Kale"\ncategory = "b"\nsource = "x"\ncolour = "green"\nstages = [\n'
        '  { name = "growth", days = 30, temperature = { target = 19.0, band = 3.0 },'
        " humidity = { target = 65.0, band = 10.0 }, light_hours = 16, ppfd = 250 },\n]\n",
        encoding="utf-8",
    )
    with pytest.raises(CatalogueError, match=r"kale\.colour"):
        load_catalogue(path)
