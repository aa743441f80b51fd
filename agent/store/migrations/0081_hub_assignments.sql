-- Which farm each hub entity belongs to (issue 24): a hub area mapped to a farm by an admin, or
-- an entity assigned to a farm on its own (which wins over its area). An entity of neither is
-- of no farm: only admins see and control it. Not synced: the hub and its areas are the
-- agent's own (the cloud keeps its own for the hub it reaches). A farm's deletion takes its
-- mappings with it.
CREATE TABLE hub_area_farms (
    area_id TEXT PRIMARY KEY,
    farm_id TEXT NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    assigned_by TEXT,
    assigned_at TEXT NOT NULL
);
CREATE INDEX hub_area_farms_farm ON hub_area_farms (farm_id);

CREATE TABLE hub_entity_farms (
    entity_id TEXT PRIMARY KEY,
    farm_id TEXT NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    assigned_by TEXT,
    assigned_at TEXT NOT NULL
);
CREATE INDEX hub_entity_farms_farm ON hub_entity_farms (farm_id);
