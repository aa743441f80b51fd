-- Identity flows on the cloud: registration, MFA replay protection (docs/design.md, section 4).

-- The name a user gives at registration (the agent's users carry it too).
ALTER TABLE users ADD COLUMN full_name text NOT NULL DEFAULT '' CHECK (length(full_name) <= 200);

-- The last TOTP time step accepted for the user: a code is accepted once, so a step not after
-- it is refused (RFC 6238 section 5.2). Reset with the seed.
ALTER TABLE users ADD COLUMN mfa_last_step bigint;

-- Login throttling counts recent failures per address and per client from the event log.
CREATE INDEX auth_events_email_idx ON auth_events (lower(email), created_at DESC);
CREATE INDEX auth_events_ip_idx ON auth_events (ip, created_at DESC) WHERE ip IS NOT NULL;
