-- The POS provider integration (docs/design.md, section 9, issue 10): configurations with sealed
-- secrets, the synced mirror of the provider's objects, sync jobs, webhook events and harvest
-- pushes. Every table: RLS enabled and forced; the owner of a configuration sees its rows on the
-- user path (farm_app); the background worker and the webhook use the system path (farm_sync).

CREATE TABLE pos_configs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (name <> ''),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'production')),
    -- AES-256-GCM (protocol/secretbox.py) bound to the configuration's id; the key is the
    -- operator's (CLOUD_SECRET_KEY) and never stored here.
    access_token bytea NOT NULL,
    signature_key bytea,
    notification_url text,
    location_ids text[] NOT NULL DEFAULT '{}',
    crop_mappings jsonb NOT NULL DEFAULT '[]',
    merchant_id text,
    is_active boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, owner_id)
);
CREATE UNIQUE INDEX pos_configs_one_active ON pos_configs (owner_id) WHERE is_active;
CREATE INDEX pos_configs_merchant ON pos_configs (merchant_id);

-- One row per provider object, keyed on the provider's id; updated only by a newer updated_at.
CREATE TABLE pos_objects (
    config_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    resource text NOT NULL,
    object_id text NOT NULL,
    location_id text,
    created_at timestamptz,
    updated_at timestamptz,
    deleted boolean NOT NULL DEFAULT false,
    data jsonb NOT NULL,
    synced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (config_id, resource, object_id),
    FOREIGN KEY (config_id, owner_id) REFERENCES pos_configs (id, owner_id) ON DELETE CASCADE
);
CREATE INDEX pos_objects_by_time ON pos_objects (config_id, resource, created_at DESC, object_id);

-- How far each resource has been pulled: the next incremental pull starts at high_water.
CREATE TABLE pos_sync_cursors (
    config_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    resource text NOT NULL,
    high_water timestamptz,
    last_synced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (config_id, resource),
    FOREIGN KEY (config_id, owner_id) REFERENCES pos_configs (id, owner_id) ON DELETE CASCADE
);

CREATE TABLE pos_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    config_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    kind text NOT NULL CHECK (kind IN ('all', 'customers', 'orders', 'payments', 'products')),
    trigger text NOT NULL CHECK (trigger IN ('manual', 'schedule', 'webhook')),
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    steps text[] NOT NULL,
    step integer NOT NULL DEFAULT 0,
    -- Where the current step stands: the provider's cursor and, for orders, the location chunk.
    position jsonb,
    since timestamptz,
    step_high_water timestamptz,
    pages integer NOT NULL DEFAULT 0,
    records integer NOT NULL DEFAULT 0,
    progress jsonb NOT NULL DEFAULT '{}',
    error text,
    attempts integer NOT NULL DEFAULT 0,
    run_after timestamptz NOT NULL DEFAULT now(),
    lease_owner uuid,
    lease_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (config_id, owner_id) REFERENCES pos_configs (id, owner_id) ON DELETE CASCADE
);
-- Never two live jobs of one kind for one configuration.
CREATE UNIQUE INDEX pos_jobs_one_live ON pos_jobs (config_id, kind)
    WHERE state IN ('queued', 'running');
CREATE INDEX pos_jobs_due ON pos_jobs (run_after) WHERE state IN ('queued', 'running');
CREATE INDEX pos_jobs_of_config ON pos_jobs (config_id, created_at DESC);

-- Webhook events, stored before they are applied; a repeated event_id is dropped.
CREATE TABLE pos_webhook_events (
    config_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    event_id text NOT NULL,
    type text NOT NULL,
    body jsonb NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    applied_at timestamptz,
    error text,
    PRIMARY KEY (config_id, event_id),
    FOREIGN KEY (config_id, owner_id) REFERENCES pos_configs (id, owner_id) ON DELETE CASCADE
);
CREATE INDEX pos_webhook_events_pending ON pos_webhook_events (received_at)
    WHERE applied_at IS NULL;

-- Harvests reaching the shop: a harvested grow plan with a quantity, pushed once to the POS
-- inventory of the variation its crop maps to.
ALTER TABLE grow_plans ADD COLUMN harvested_quantity numeric
    CHECK (harvested_quantity IS NULL OR harvested_quantity > 0);
ALTER TABLE grow_plans ADD COLUMN harvest_unit text;

CREATE TABLE pos_harvest_pushes (
    grow_plan_id uuid PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    species text NOT NULL,
    quantity numeric NOT NULL,
    unit text NOT NULL,
    harvested_at timestamptz,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'pushed', 'unmapped', 'failed')),
    config_id uuid REFERENCES pos_configs (id) ON DELETE SET NULL,
    variation_id text,
    location_id text,
    pushed_quantity numeric,
    attempts integer NOT NULL DEFAULT 0,
    run_after timestamptz NOT NULL DEFAULT now(),
    error text,
    pushed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pos_harvest_pushes_due ON pos_harvest_pushes (run_after) WHERE state = 'pending';

-- The hook from the farm mirror: whatever path writes a harvested plan with a quantity (sync
-- apply today) queues its push, in the same transaction; a replayed batch queues nothing new.
CREATE FUNCTION pos_queue_harvest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pos_harvest_pushes (grow_plan_id, farm_id, species, quantity, unit, harvested_at)
    VALUES (NEW.id, NEW.farm_id, NEW.species, NEW.harvested_quantity, NEW.harvest_unit,
            NEW.ended_at)
    ON CONFLICT (grow_plan_id) DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER grow_plans_harvest_to_pos AFTER INSERT OR UPDATE ON grow_plans
    FOR EACH ROW
    WHEN (NEW.status = 'harvested' AND NEW.harvested_quantity IS NOT NULL
          AND NEW.harvest_unit IS NOT NULL)
    EXECUTE FUNCTION pos_queue_harvest();

DO $$
DECLARE
    table_name text;
BEGIN
    FOREACH table_name IN ARRAY ARRAY[
        'pos_configs', 'pos_objects', 'pos_sync_cursors', 'pos_jobs', 'pos_webhook_events',
        'pos_harvest_pushes'
    ] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', table_name);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', table_name);
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_sync', table_name
        );
        EXECUTE format(
            'CREATE POLICY system_all ON public.%I FOR ALL TO farm_sync'
            ' USING (true) WITH CHECK (true)',
            table_name
        );
    END LOOP;
    -- The user path: a configuration and everything hanging off it belong to its owner alone.
    FOREACH table_name IN ARRAY ARRAY[
        'pos_configs', 'pos_objects', 'pos_sync_cursors', 'pos_jobs', 'pos_webhook_events'
    ] LOOP
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_app', table_name
        );
        EXECUTE format(
            'CREATE POLICY owner_all ON public.%I FOR ALL TO farm_app'
            ' USING (owner_id = (SELECT authz.caller_id()))'
            ' WITH CHECK (owner_id = (SELECT authz.caller_id()))',
            table_name
        );
    END LOOP;
END
$$;

-- Harvest pushes: readable by the owner of the configuration they went to.
GRANT SELECT ON pos_harvest_pushes TO farm_app;
CREATE POLICY owner_select ON pos_harvest_pushes FOR SELECT TO farm_app
    USING (config_id IN (SELECT id FROM pos_configs));
