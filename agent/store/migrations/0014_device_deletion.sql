-- Deleting a device takes its alert rules with it (ON DELETE CASCADE); its active alerts must
-- not stay active for ever with nothing left to clear them.
CREATE TRIGGER devices_clear_alerts BEFORE DELETE ON devices
BEGIN
    UPDATE alerts SET state = 'cleared',
                      cleared_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                      cleared_reason = 'device_deleted'
     WHERE device_id = OLD.id AND state = 'active';
END;

-- A deleted fan or sensor leaves the climate settings that named it (the loop would otherwise
-- command a fan that is gone every 30 s for ever). A sensor list left empty falls back to
-- NULL: the farm's sensors, as when none were named. The update is synced like any other.
CREATE TRIGGER devices_leave_climate BEFORE DELETE ON devices
BEGIN
    UPDATE climate_settings
       SET fan_ids = (SELECT json_group_array(value) FROM json_each(fan_ids)
                       WHERE value <> OLD.id),
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     WHERE farm_id = OLD.farm_id
       AND EXISTS (SELECT 1 FROM json_each(fan_ids) WHERE value = OLD.id);
    UPDATE climate_settings
       SET sensor_device_ids = (SELECT CASE count(*) WHEN 0 THEN NULL
                                       ELSE json_group_array(value) END
                                  FROM json_each(sensor_device_ids) WHERE value <> OLD.id),
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     WHERE farm_id = OLD.farm_id AND sensor_device_ids IS NOT NULL
       AND EXISTS (SELECT 1 FROM json_each(sensor_device_ids) WHERE value = OLD.id);
END;
