-- Which harvests a POS configuration takes (issue 24): a paired agent named another cloud user
-- as a farm's creator, and its harvest was pushed to that user's shop. A harvest of an agent's
-- farm now goes to the active configuration of the agent's owner, or of an owner who opted in
-- for that agent or that farm here (PUT /api/v1/pos/configs/{id}: harvest_agent_ids,
-- harvest_farm_ids). The farm's creator no longer decides it.
ALTER TABLE pos_configs
    ADD COLUMN harvest_agent_ids uuid[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(harvest_agent_ids) <= 100),
    ADD COLUMN harvest_farm_ids uuid[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(harvest_farm_ids) <= 200);
