-- Modbus devices (docs/firmware-profiles.md, "Modbus devices"): transport 'modbus', and several
-- devices on one bus. A Modbus device keeps its bus in serial_port (the RS-485 port, or
-- tcp://host:port) and its address (unit id, line settings) in serial_settings; one device per
-- bus and unit id, one EZO circuit per UART as before.
--
-- The transport CHECK is widened in place, as SQLite documents for changing a CHECK constraint
-- (https://www.sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes"):
-- every existing row satisfies the wider constraint, and rebuilding the table would run its
-- ON DELETE CASCADE foreign keys.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql, 'CHECK (transport IN (''mqtt'', ''serial''))',
                  'CHECK (transport IN (''mqtt'', ''serial'', ''modbus''))')
WHERE type = 'table' AND name = 'devices';
-- RESET turns it off again and makes this connection read the changed schema.
PRAGMA writable_schema = RESET;

DROP INDEX devices_serial_port;
CREATE UNIQUE INDEX devices_serial_port
    ON devices(serial_port, coalesce(json_extract(serial_settings, '$.unit'), 0))
    WHERE serial_port IS NOT NULL;
