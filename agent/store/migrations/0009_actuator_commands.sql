-- Actuator control (issue 4): every command sent to a fan, light, pump or valve with its outcome,
-- and per actuator the control mode and the daily on-window schedule.

-- One row per command, whatever its outcome; 'unavailable' means the device was not connected
-- to the agent and nothing was sent. Not synced: the cloud has no command history (yet).
CREATE TABLE actuator_commands (
    id           TEXT PRIMARY KEY,
    device_id    TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    source       TEXT NOT NULL CHECK (source IN ('manual', 'schedule', 'climate')),
    -- The person who asked (manual commands); NULL for automation or a deleted user.
    requested_by TEXT REFERENCES users(id) ON DELETE SET NULL,
    command      TEXT NOT NULL CHECK (command IN ('power', 'fan_speed', 'brightness', 'valve')),
    -- power/valve as 0/1, fan_speed/brightness as 0-100 %.
    value        INTEGER NOT NULL,
    outcome      TEXT NOT NULL
        CHECK (outcome IN ('confirmed', 'timed_out', 'rejected', 'unconfirmed', 'unavailable')),
    detail       TEXT NOT NULL DEFAULT '',
    -- State the device reported while the agent waited (JSON object).
    observed     TEXT NOT NULL DEFAULT '{}',
    requested_at TEXT NOT NULL,
    finished_at  TEXT NOT NULL
);
CREATE INDEX actuator_commands_device ON actuator_commands(device_id, requested_at);

-- How an actuator is driven. mode 'auto' hands it to automation (climate loop, schedule);
-- 'manual' means a person set it. The schedule is a daily window in the agent's time zone:
-- on from start_time, off from end_time (HH:MM); end before start crosses midnight.
-- on_value is the level while on (fan speed or brightness %); NULL means full / power on.
CREATE TABLE actuator_control (
    device_id        TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    mode             TEXT NOT NULL DEFAULT 'auto' CHECK (mode IN ('auto', 'manual')),
    schedule_enabled INTEGER NOT NULL DEFAULT 0 CHECK (schedule_enabled IN (0, 1)),
    start_time       TEXT CHECK (start_time GLOB '[0-2][0-9]:[0-5][0-9]'),
    end_time         TEXT CHECK (end_time GLOB '[0-2][0-9]:[0-5][0-9]'),
    on_value         INTEGER CHECK (on_value BETWEEN 0 AND 100),
    updated_at       TEXT NOT NULL,
    CHECK (schedule_enabled = 0 OR (start_time IS NOT NULL AND end_time IS NOT NULL
                                    AND start_time != end_time))
);
