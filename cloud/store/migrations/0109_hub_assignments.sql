-- Which farm each hub entity belongs to (issue 24), as the agent keeps them (its migration 0081):
-- a hub area mapped to a farm by an admin, or an entity assigned to a farm on its own (which
-- wins over its area); an entity of neither is of no farm, seen and controlled by admins only.
-- Only the system path (farm_sync) touches them: the service lets admins alone change them, and
-- authorizes every reader on the entity's farm on the user path.
CREATE TABLE hub_area_farms (
    area_id text PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    assigned_by uuid,
    assigned_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hub_area_farms_farm ON hub_area_farms (farm_id);

CREATE TABLE hub_entity_farms (
    entity_id text PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    assigned_by uuid,
    assigned_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hub_entity_farms_farm ON hub_entity_farms (farm_id);

ALTER TABLE hub_area_farms ENABLE ROW LEVEL SECURITY;
ALTER TABLE hub_area_farms FORCE ROW LEVEL SECURITY;
ALTER TABLE hub_entity_farms ENABLE ROW LEVEL SECURITY;
ALTER TABLE hub_entity_farms FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON hub_area_farms, hub_entity_farms TO farm_sync;
CREATE POLICY system_all ON hub_area_farms FOR ALL TO farm_sync USING (true) WITH CHECK (true);
CREATE POLICY system_all ON hub_entity_farms FOR ALL TO farm_sync USING (true) WITH CHECK (true);
