-- Outgoing webhooks of the cloud (issue 11, part 3): receivers of one farm's events on the
-- internet, and the outbox of their deliveries. Deliveries are queued by triggers in the same
-- transaction as the event (sync apply writes agents' events) or the harvest that causes them;
-- the delivery workers of every cloud process claim them with FOR UPDATE SKIP LOCKED.

CREATE TABLE webhooks (
    id uuid PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    url text NOT NULL,
    description text NOT NULL DEFAULT '',
    event_types text[] NOT NULL,
    -- AES-256-GCM (protocol/secretbox.py) bound to the webhook's id, under the operator's key.
    secret bytea NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    disabled_reason text,
    -- Health: set at the first failure after a success, cleared by a success.
    failing_since timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    created_by uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id)
);
CREATE INDEX webhooks_farm ON webhooks (farm_id);

-- Event-log kind -> webhook event type; equal to protocol.webhooks.catalogue.EVENT_KINDS
-- (a test compares them).
CREATE TABLE webhook_event_kinds (
    kind text PRIMARY KEY,
    event_type text NOT NULL
);
INSERT INTO webhook_event_kinds (kind, event_type) VALUES
    ('alert_raised', 'alert.raised'),
    ('alert_cleared', 'alert.cleared'),
    ('device_online', 'device.online'),
    ('device_offline', 'device.offline'),
    ('device_fault', 'device.fault'),
    ('farm_status', 'farm.status_changed'),
    ('webhook_disabled', 'webhook.disabled'),
    ('harvest_ready', 'grow_plan.harvest_ready');

-- One message to one webhook; ``id`` is the webhook-id header, the same on every retry.
CREATE TABLE webhook_deliveries (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    webhook_id uuid NOT NULL,
    farm_id uuid NOT NULL,
    event_type text NOT NULL,
    event_id text,
    -- The JSON body, fixed when queued: every attempt signs and sends the same bytes.
    body text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error text,
    last_attempt_at timestamptz,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    FOREIGN KEY (webhook_id, farm_id) REFERENCES webhooks (id, farm_id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, created_at DESC);

-- Whether a webhook's creator still manages its farm: an admin, or a farm manager who created
-- it or holds read_write on it. Queued deliveries follow the creator's access, not the event's.
CREATE FUNCTION webhook_creator_manages(creator uuid, farm uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.users AS u
        WHERE u.id = creator AND u.status = 'active'
          AND (u.role = 'admin'
               OR (u.role = 'farm_manager'
                   AND (EXISTS (SELECT 1 FROM public.farms AS f
                                WHERE f.id = farm AND f.user_id = u.id)
                        OR EXISTS (SELECT 1 FROM public.permissions AS p
                                   WHERE p.user_id = u.id AND p.farm_id = farm
                                     AND p.permission_type = 'read_write'))))
    )
$$;

-- The triggers run as farm_sync (SECURITY DEFINER, owned by it below): whoever writes the
-- event, its deliveries are queued, and a user's own RLS never decides another user's webhook.
CREATE FUNCTION webhooks_queue_event() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.webhook_deliveries (webhook_id, farm_id, event_type, event_id, body)
    SELECT w.id, w.farm_id, k.event_type, NEW.id::text,
           jsonb_build_object(
               'type', k.event_type,
               'timestamp', to_char(NEW.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'data', jsonb_build_object(
                   'event_id', NEW.id, 'farm_id', NEW.farm_id, 'device_id', NEW.device_id,
                   'kind', NEW.kind, 'severity', NEW.severity, 'message', NEW.message,
                   'details', NEW.data))::text
    FROM public.webhook_event_kinds AS k
    JOIN public.webhooks AS w ON w.farm_id = NEW.farm_id AND w.enabled
    WHERE k.kind = NEW.kind AND k.event_type = ANY (w.event_types)
      AND public.webhook_creator_manages(w.created_by, w.farm_id);
    RETURN NULL;
END
$$;

CREATE FUNCTION webhooks_queue_harvest() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.webhook_deliveries (webhook_id, farm_id, event_type, event_id, body)
    SELECT w.id, w.farm_id, 'grow_plan.harvested', NEW.id::text,
           jsonb_build_object(
               'type', 'grow_plan.harvested',
               'timestamp', to_char(coalesce(NEW.ended_at, now()) AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'data', jsonb_build_object(
                   'grow_plan_id', NEW.id, 'farm_id', NEW.farm_id, 'species', NEW.species,
                   'species_name', NEW.name, 'plant_count', NEW.plant_count,
                   'harvested_quantity', NEW.harvested_quantity,
                   'harvest_unit', NEW.harvest_unit,
                   'started_at', NEW.started_at, 'ended_at', NEW.ended_at))::text
    FROM public.webhooks AS w
    WHERE w.farm_id = NEW.farm_id AND w.enabled
      AND 'grow_plan.harvested' = ANY (w.event_types)
      AND public.webhook_creator_manages(w.created_by, w.farm_id);
    RETURN NULL;
END
$$;

-- A replayed batch upserts (ON CONFLICT DO UPDATE): no INSERT trigger fires for a known event,
-- and a plan already harvested does not become harvested again, so nothing is queued twice.
CREATE TRIGGER events_to_webhooks AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION webhooks_queue_event();
CREATE TRIGGER grow_plans_harvested_to_webhooks AFTER INSERT ON grow_plans
    FOR EACH ROW WHEN (NEW.status = 'harvested')
    EXECUTE FUNCTION webhooks_queue_harvest();
CREATE TRIGGER grow_plans_harvest_to_webhooks AFTER UPDATE ON grow_plans
    FOR EACH ROW WHEN (NEW.status = 'harvested' AND OLD.status IS DISTINCT FROM 'harvested')
    EXECUTE FUNCTION webhooks_queue_harvest();

REVOKE EXECUTE ON FUNCTION webhook_creator_manages(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_creator_manages(uuid, uuid) TO farm_sync;
REVOKE EXECUTE ON FUNCTION webhooks_queue_event() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION webhooks_queue_harvest() FROM PUBLIC;

-- ALTER ... OWNER needs the migrator to be a member of farm_sync for a moment (as 0004 does for
-- farm_authz), and farm_sync the right to create in the schema; both are dropped right after (a member
-- of farm_sync would see every row; farm_sync creates nothing).
GRANT CREATE ON SCHEMA public TO farm_sync;
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'farm_sync', 'MEMBER') THEN
        EXECUTE format('GRANT farm_sync TO %I', current_user);
    END IF;
END
$$;
ALTER FUNCTION webhook_creator_manages(uuid, uuid) OWNER TO farm_sync;
ALTER FUNCTION webhooks_queue_event() OWNER TO farm_sync;
ALTER FUNCTION webhooks_queue_harvest() OWNER TO farm_sync;
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_auth_members AS m
        WHERE m.roleid = 'farm_sync'::regrole AND m.member = current_user::regrole
    ) THEN
        EXECUTE format('REVOKE farm_sync FROM %I', current_user);
    END IF;
END
$$;
REVOKE CREATE ON SCHEMA public FROM farm_sync;

-- Row-level security: the system path (delivery workers, triggers) sees everything; on the
-- user path webhooks and their deliveries are for those who may write the farm (the service
-- adds the role cap: admins and farm managers). Only the triggers read the kinds table.
DO $$
DECLARE
    table_name text;
    can_write constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.writable_farm_ids())::uuid[])';
BEGIN
    FOREACH table_name IN ARRAY ARRAY['webhooks', 'webhook_deliveries', 'webhook_event_kinds']
    LOOP
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
    FOREACH table_name IN ARRAY ARRAY['webhooks', 'webhook_deliveries'] LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_app', table_name);
        EXECUTE format(
            'CREATE POLICY member_all ON public.%I FOR ALL TO farm_app USING (%s) WITH CHECK (%s)',
            table_name, can_write, can_write
        );
    END LOOP;
END
$$;
