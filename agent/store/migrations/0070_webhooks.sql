-- Outgoing webhooks (issue 11, part 3): receivers of one farm's events, and the outbox of their
-- deliveries. A delivery is queued by the triggers below in the same transaction as the event
-- (or the harvest) that causes it, so nothing committed is ever without its deliveries. The
-- tables are the agent's own: they are not synced (the cloud keeps webhooks of its own).
-- Timestamps are ISO 8601 UTC text with milliseconds and a trailing Z (they sort like time).

CREATE TABLE webhooks (
    id                   TEXT PRIMARY KEY,
    farm_id              TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    -- JSON array of webhook event types (protocol/webhooks/catalogue.py).
    event_types          TEXT NOT NULL,
    -- The signing key must be at hand to sign; the database is the agent's alone (mode 0600).
    secret               TEXT NOT NULL,
    enabled              INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    disabled_reason      TEXT,
    -- Health: set at the first failure after a success, cleared by a success.
    failing_since        TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_success_at      TEXT,
    last_failure_at      TEXT,
    created_by           TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
CREATE INDEX webhooks_farm ON webhooks(farm_id);

-- Event-log kind -> webhook event type; equal to protocol.webhooks.catalogue.EVENT_KINDS
-- (a test compares them).
CREATE TABLE webhook_event_kinds (
    kind       TEXT PRIMARY KEY,
    event_type TEXT NOT NULL
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

-- One message to one webhook. ``id`` is the webhook-id header, the same on every retry.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_type       TEXT NOT NULL,
    event_id         TEXT,
    -- The JSON body, fixed when queued: every attempt signs and sends the same bytes.
    body             TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error       TEXT,
    last_attempt_at  TEXT,
    next_attempt_at  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    delivered_at     TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_of ON webhook_deliveries(webhook_id, created_at);

-- A delivery for each enabled webhook of the event's farm subscribed to the event's type, while
-- the webhook's creator still manages that farm (an admin, or a farm manager holding a grant).
CREATE TRIGGER webhooks_on_event AFTER INSERT ON events
BEGIN
    INSERT INTO webhook_deliveries (id, webhook_id, event_type, event_id, body, next_attempt_at,
                                    created_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
                 || substr(hex(randomblob(2)), 2) || '-'
                 || substr('89AB', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2)
                 || '-' || hex(randomblob(6))),
           w.id, k.event_type, NEW.id,
           json_object('type', k.event_type, 'timestamp', NEW.ts,
                       'data', json_object('event_id', NEW.id, 'farm_id', NEW.farm_id,
                                           'device_id', NEW.device_id, 'kind', NEW.kind,
                                           'severity', NEW.severity, 'message', NEW.message,
                                           'details', json(NEW.data))),
           strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM webhook_event_kinds AS k
    JOIN webhooks AS w ON w.farm_id = NEW.farm_id AND w.enabled = 1
    WHERE k.kind = NEW.kind
      AND EXISTS (SELECT 1 FROM json_each(w.event_types) AS t WHERE t.value = k.event_type)
      AND EXISTS (SELECT 1 FROM users AS u
                  WHERE u.id = w.created_by AND u.status = 'active'
                    AND (u.role = 'admin'
                         OR (u.role = 'farm_manager'
                             AND EXISTS (SELECT 1 FROM permissions AS p
                                         WHERE p.user_id = u.id AND p.farm_id = w.farm_id
                                           AND p.permission_type = 'read_write'))));
END;

-- grow_plan.harvested: the plan itself becoming harvested (no event-log entry marks it).
CREATE TRIGGER webhooks_on_harvest AFTER UPDATE OF status ON grow_plans
WHEN NEW.status = 'harvested' AND OLD.status <> 'harvested'
BEGIN
    INSERT INTO webhook_deliveries (id, webhook_id, event_type, event_id, body, next_attempt_at,
                                    created_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
                 || substr(hex(randomblob(2)), 2) || '-'
                 || substr('89AB', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2)
                 || '-' || hex(randomblob(6))),
           w.id, 'grow_plan.harvested', NEW.id,
           json_object('type', 'grow_plan.harvested',
                       'timestamp', coalesce(NEW.ended_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                       'data', json_object('grow_plan_id', NEW.id, 'farm_id', NEW.farm_id,
                                           'species', NEW.species,
                                           'species_name', NEW.species_name,
                                           'plant_count', NEW.plant_count,
                                           'harvested_quantity', NEW.harvested_quantity,
                                           'harvest_unit', NEW.harvest_unit,
                                           'started_at', NEW.started_at,
                                           'ended_at', NEW.ended_at)),
           strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM webhooks AS w
    WHERE w.farm_id = NEW.farm_id AND w.enabled = 1
      AND EXISTS (SELECT 1 FROM json_each(w.event_types) AS t
                  WHERE t.value = 'grow_plan.harvested')
      AND EXISTS (SELECT 1 FROM users AS u
                  WHERE u.id = w.created_by AND u.status = 'active'
                    AND (u.role = 'admin'
                         OR (u.role = 'farm_manager'
                             AND EXISTS (SELECT 1 FROM permissions AS p
                                         WHERE p.user_id = u.id AND p.farm_id = w.farm_id
                                           AND p.permission_type = 'read_write'))));
END;
