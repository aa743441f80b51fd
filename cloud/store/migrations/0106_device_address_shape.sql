-- A mirrored device's address in the API's one shape (issue 24): the mirror kept the agent's
-- column names (serial_port, serial_settings, topic_variables) while GET /api/v1/devices answers
-- protocol.schemas.devices.Address (port and line settings, or topic_base and variables), and
-- the first serial device synced made every device list a 500. Rows written before are put in
-- that shape here; the mirror writes it from now on.
-- The schema owner rewrites the rows: it is subject to RLS (FORCE) and has no policy of its own,
-- so the force is lifted for this transaction only.
ALTER TABLE devices NO FORCE ROW LEVEL SECURITY;
UPDATE devices
SET address = CASE
    WHEN address->>'transport' = 'serial' AND address ? 'serial_port' THEN
        jsonb_build_object('transport', 'serial', 'port', address->'serial_port')
        || COALESCE(
            (SELECT jsonb_object_agg(key, value)
             FROM jsonb_each(COALESCE(address->'serial_settings', '{}'::jsonb))
             WHERE key IN ('baudrate', 'bytesize', 'parity', 'stopbits')),
            '{}'::jsonb)
    WHEN address->>'transport' = 'mqtt' AND address ? 'topic_base' THEN
        jsonb_build_object('transport', 'mqtt', 'topic_base', address->'topic_base',
                           'variables', COALESCE(address->'topic_variables', '{}'::jsonb))
    ELSE '{}'::jsonb
END
WHERE address ?| ARRAY['serial_port', 'serial_settings', 'topic_variables']
   OR (address <> '{}'::jsonb AND NOT address ? 'port' AND NOT address ? 'topic_base')
   OR (address->>'transport' = 'mqtt' AND NOT address ? 'variables');
ALTER TABLE devices FORCE ROW LEVEL SECURITY;
