-- Notifications to people (docs/operations.md, "Notifications"): contact points reached through
-- Apprise URLs, per-farm rules choosing which events go to which contact points, and the outbox
-- of messages. A first message is queued by the trigger below in the same transaction as the
-- event that causes it, so nothing committed is ever without its notifications; repeats and
-- escalations are queued by the sender's planner, at most once each (the unique index).
-- The tables are the agent's own (not synced). Timestamps are ISO 8601 UTC text with
-- milliseconds and a trailing Z (they sort like time).

CREATE TABLE contact_points (
    id                   TEXT PRIMARY KEY,
    farm_id              TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name                 TEXT NOT NULL,
    -- The URL's scheme (ntfy, tgram, mailto, ...): what the API shows instead of the URL.
    service              TEXT NOT NULL,
    -- The Apprise URL, AES-GCM under a key derived from the agent's signing key, bound to id.
    url_sealed           BLOB NOT NULL,
    owner_id             TEXT,
    -- Quiet hours, local time of FARM_TIMEZONE ('HH:MM'); both or neither.
    quiet_start          TEXT,
    quiet_end            TEXT,
    enabled              INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    -- Health: set at the first failure after a success, cleared by a success.
    failing_since        TEXT,
    failing_reported_at  TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_success_at      TEXT,
    last_failure_at      TEXT,
    last_error           TEXT,
    created_by           TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL,
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);
CREATE INDEX contact_points_farm ON contact_points(farm_id);

CREATE TABLE notification_rules (
    id                 TEXT PRIMARY KEY,
    farm_id            TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name               TEXT NOT NULL DEFAULT '',
    -- JSON arrays: event-log kinds (protocol/notify/catalogue.py), severities, contact point ids.
    event_kinds        TEXT NOT NULL,
    severities         TEXT NOT NULL,
    contact_point_ids  TEXT NOT NULL,
    -- device_offline: told only once the device stayed offline this long.
    offline_after_min  INTEGER NOT NULL DEFAULT 0 CHECK (offline_after_min >= 0),
    repeat_every_min   INTEGER CHECK (repeat_every_min IS NULL OR repeat_every_min >= 1),
    escalate_after_min INTEGER CHECK (escalate_after_min IS NULL OR escalate_after_min >= 1),
    escalate_to        TEXT NOT NULL DEFAULT '[]',
    enabled            INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_by         TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
CREATE INDEX notification_rules_farm ON notification_rules(farm_id);

-- One message to one contact point. ``step`` is first, repeat (round n), escalation or test.
CREATE TABLE notifications (
    id               TEXT PRIMARY KEY,
    farm_id          TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    contact_point_id TEXT NOT NULL REFERENCES contact_points(id) ON DELETE CASCADE,
    rule_id          TEXT REFERENCES notification_rules(id) ON DELETE SET NULL,
    event_id         TEXT,
    step             TEXT NOT NULL CHECK (step IN ('first', 'repeat', 'escalation', 'test')),
    round            INTEGER NOT NULL DEFAULT 0,
    kind             TEXT NOT NULL,
    severity         TEXT NOT NULL,
    -- The event as it was queued (kind, message, data, ts, device): the message is made of it.
    event            TEXT NOT NULL DEFAULT '{}',
    -- handover: the agent could not reach the service for FARM_NOTIFY_HANDOVER_AFTER_S and
    -- gave the message to the cloud in its sync outbox; it never sends it itself again.
    status           TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sent', 'failed', 'cancelled', 'handover')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    answer           TEXT,
    last_attempt_at  TEXT,
    next_attempt_at  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    sent_at          TEXT
);
CREATE UNIQUE INDEX notifications_once
    ON notifications(event_id, rule_id, contact_point_id, step, round)
    WHERE event_id IS NOT NULL AND rule_id IS NOT NULL;
CREATE INDEX notifications_due ON notifications(next_attempt_at) WHERE status = 'pending';
CREATE INDEX notifications_farm ON notifications(farm_id, created_at);
CREATE INDEX notifications_event ON notifications(event_id);

-- The first message of each enabled rule of the event's farm naming its kind and severity, to
-- each of the rule's enabled contact points of that farm. A device_offline waits for the
-- rule's offline_after_min (the sender cancels it if the device came back).
CREATE TRIGGER notifications_on_event AFTER INSERT ON events
BEGIN
    INSERT OR IGNORE INTO notifications (id, farm_id, contact_point_id, rule_id, event_id, step,
                                         round, kind, severity, event, next_attempt_at,
                                         created_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
                 || substr(hex(randomblob(2)), 2) || '-'
                 || substr('89AB', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2)
                 || '-' || hex(randomblob(6))),
           NEW.farm_id, c.id, r.id, NEW.id, 'first', 0, NEW.kind, NEW.severity,
           json_object('id', NEW.id, 'kind', NEW.kind, 'severity', NEW.severity,
                       'message', NEW.message, 'device_id', NEW.device_id, 'ts', NEW.ts,
                       'data', json(NEW.data)),
           CASE WHEN NEW.kind = 'device_offline' AND r.offline_after_min > 0
                THEN strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ts,
                              '+' || r.offline_after_min || ' minutes')
                ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END,
           strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM notification_rules AS r
    JOIN json_each(r.contact_point_ids) AS cp
    JOIN contact_points AS c ON c.id = cp.value AND c.farm_id = r.farm_id AND c.enabled = 1
    WHERE r.farm_id = NEW.farm_id AND r.enabled = 1
      AND EXISTS (SELECT 1 FROM json_each(r.event_kinds) AS k WHERE k.value = NEW.kind)
      AND EXISTS (SELECT 1 FROM json_each(r.severities) AS s WHERE s.value = NEW.severity);
END;
