"""The crop catalogue: default stages per species, read from TOML and validated at start-up.

The catalogue is data (agent/crops/catalogue.toml), like the firmware profiles: a new crop is a
new table in the file, not new code. A bad entry stops start-up with the file and field named.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.schemas.grow_plans import Crop, CropList, Stage

__all__ = ["CatalogueError", "CropCatalogue", "load_catalogue", "parse_catalogue"]

_KEY = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""A crop key has the form of a shelf's ``current_species``, which a running plan sets."""


class CatalogueError(Exception):
    """The catalogue file is unreadable or an entry is invalid."""


class _Entry(BaseModel):
    """One crop as written in the file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    category: str = Field(min_length=1, max_length=64)
    source: str = Field(min_length=1, max_length=500)
    stages: list[Stage] = Field(min_length=1, max_length=20)


class CropCatalogue:
    """Crops by key, in file order."""

    def __init__(self, crops: Mapping[str, Crop]) -> None:
        self._crops = dict(crops)

    def get(self, key: str) -> Crop | None:
        """The crop with ``key``, if the catalogue has one."""
        return self._crops.get(key)

    def page(self, limit: int, offset: int) -> CropList:
        """A page of the catalogue, as ``GET /api/v1/crops`` answers it."""
        crops = list(self._crops.values())
        return CropList(
            crops=crops[offset : offset + limit], total=len(crops), limit=limit, offset=offset
        )


def _field(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)


def parse_catalogue(data: Mapping[str, Any], origin: str) -> CropCatalogue:
    """Validate decoded catalogue data; ``origin`` names the file in errors."""
    crops: dict[str, Crop] = {}
    for key, raw in data.items():
        if _KEY.fullmatch(key) is None:
            raise CatalogueError(f"{origin}: crop key {key!r} must match {_KEY.pattern}")
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError as err:
            first = err.errors()[0]
            field = _field((key, *first["loc"]))
            raise CatalogueError(f"{origin}: {field}: {first['msg']}") from err
        crops[key] = Crop(
            key=key,
            name=entry.name,
            category=entry.category,
            source=entry.source,
            total_days=sum(stage.days for stage in entry.stages),
            stages=entry.stages,
        )
    if not crops:
        raise CatalogueError(f"{origin}: the catalogue holds no crops")
    return CropCatalogue(crops)


def load_catalogue(path: Path | None = None) -> CropCatalogue:
    """Read and validate the catalogue: ``path``, or the one shipped with the agent."""
    origin = "agent/crops/catalogue.toml" if path is None else str(path)
    try:
        if path is None:
            text = resources.files("agent.crops").joinpath("catalogue.toml").read_text("utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise CatalogueError(f"{origin}: {err}") from err
    return parse_catalogue(data, origin)
