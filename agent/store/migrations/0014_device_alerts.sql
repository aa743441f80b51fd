-- Deleting a device takes its alert rules with it (ON DELETE CASCADE); its active alerts must
-- not stay active for ever with nothing left to clear them.
CREATE TRIGGER devices_clear_alerts BEFORE DELETE ON devices
BEGIN
    UPDATE alerts SET state = 'cleared',
                      cleared_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                      cleared_reason = 'device_deleted'
     WHERE device_id = OLD.id AND state = 'active';
END;
