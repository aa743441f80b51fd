-- Notifications to people from the cloud (docs/operations.md, "Notifications to people"): the
-- farm's contact points as its agent syncs them (the Apprise URL sealed under the operator's
-- key, bound to the contact point's id), the watch of agents gone silent, and the outbox of
-- what the cloud sends. Only one process detects a silence (an advisory lock); each message is
-- queued once (unique per contact point, kind and silence) and claimed with FOR UPDATE SKIP
-- LOCKED by the senders of every process.

CREATE TABLE contact_points (
    id uuid PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    name text NOT NULL,
    service text NOT NULL,
    url_sealed bytea NOT NULL,
    quiet_start text,
    quiet_end text,
    enabled boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id)
);
CREATE INDEX contact_points_farm ON contact_points (farm_id);

-- One spell of silence of one agent: from its last batch (silent_since) until one arrives again.
CREATE TABLE agent_silences (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    silent_since timestamptz NOT NULL,
    noticed_at timestamptz NOT NULL DEFAULT now(),
    back_at timestamptz,
    PRIMARY KEY (agent_id, silent_since)
);
CREATE UNIQUE INDEX agent_silences_open ON agent_silences (agent_id) WHERE back_at IS NULL;

-- What the cloud sends: a farm silent or back (one per contact point and silence), or a
-- message its agent could not deliver and handed over (one per agent notification).
CREATE TABLE cloud_notifications (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL,
    contact_point_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    silent_since timestamptz,
    agent_notification_id uuid UNIQUE,
    kind text NOT NULL CHECK (kind IN ('farm_silent', 'farm_back', 'handover')),
    title text NOT NULL,
    body text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    answer text,
    last_attempt_at timestamptz,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    FOREIGN KEY (contact_point_id, farm_id) REFERENCES contact_points (id, farm_id)
        ON DELETE CASCADE,
    UNIQUE (contact_point_id, kind, agent_id, silent_since),
    CHECK ((kind = 'handover') = (agent_notification_id IS NOT NULL)),
    CHECK ((kind = 'handover') = (silent_since IS NULL))
);
CREATE INDEX cloud_notifications_due ON cloud_notifications (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX cloud_notifications_farm ON cloud_notifications (farm_id, created_at DESC);

DO $$
DECLARE
    table_name text;
    can_read constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.readable_farm_ids())::uuid[])';
BEGIN
    FOREACH table_name IN ARRAY ARRAY['contact_points', 'agent_silences', 'cloud_notifications']
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
    -- People read what was sent for the farms they may read; the rest is the system path's.
    FOREACH table_name IN ARRAY ARRAY['cloud_notifications'] LOOP
        EXECUTE format('GRANT SELECT ON public.%I TO farm_app', table_name);
        EXECUTE format(
            'CREATE POLICY member_read ON public.%I FOR SELECT TO farm_app USING (%s)',
            table_name, can_read
        );
    END LOOP;
END
$$;
