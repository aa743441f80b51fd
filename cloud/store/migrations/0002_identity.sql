-- Identity: the cloud is its authority once an agent is paired (docs/design.md, sections 1 and 4).

CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email text NOT NULL CHECK (email <> '' AND email = btrim(email)),
    -- Argon2id PHC string; NULL until the user sets a password (invitation, reset).
    password_hash text,
    role text NOT NULL DEFAULT 'user'
        CHECK (role IN ('admin', 'farm_manager', 'operator', 'analyst', 'user')),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'suspended')),
    plan text NOT NULL DEFAULT 'standard' CHECK (plan IN ('standard', 'premium')),
    email_verified boolean NOT NULL DEFAULT false,
    mfa_enabled boolean NOT NULL DEFAULT false,
    -- TOTP secret, encrypted by the service before it is stored; set at enrolment, enabled on
    -- confirmation.
    mfa_secret bytea,
    mfa_confirmed_at timestamptz,
    failed_logins integer NOT NULL DEFAULT 0 CHECK (failed_logins >= 0),
    locked_until timestamptz,
    password_changed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    last_login timestamptz,
    CHECK (NOT mfa_enabled OR mfa_secret IS NOT NULL)
);
-- E-mail addresses are unique whatever their case.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- A session is what a token's `sid` claim names; revoking it refuses its tokens at once.
CREATE TABLE sessions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoked_reason text,
    ip inet,
    user_agent text,
    UNIQUE (id, user_id)
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
-- The identity delta sent to agents lists recently revoked sessions.
CREATE INDEX sessions_revoked_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;

-- Opaque refresh tokens, stored hashed, rotated on every use: each token has at most one
-- successor, so the chain of a session is a list and a second use of a token is detectable.
CREATE TABLE refresh_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    session_id uuid NOT NULL,
    user_id uuid NOT NULL,
    token_hash bytea NOT NULL UNIQUE,
    parent_id uuid UNIQUE REFERENCES refresh_tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    FOREIGN KEY (session_id, user_id) REFERENCES sessions (id, user_id) ON DELETE CASCADE
);
CREATE INDEX refresh_tokens_session_idx ON refresh_tokens (session_id, user_id);

-- API keys act as their user; only the hash and a short display prefix are kept.
CREATE TABLE api_keys (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL DEFAULT '',
    prefix text NOT NULL UNIQUE,
    key_hash bytea NOT NULL UNIQUE,
    created_by uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    last_used_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id);

-- Single-use tokens: e-mail verification, password reset, MFA login challenge.
CREATE TABLE one_time_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose text NOT NULL CHECK (purpose IN ('verify_email', 'reset_password', 'mfa_challenge')),
    token_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX one_time_tokens_user_idx ON one_time_tokens (user_id);

-- Authentication events, append-only. user_id is NULL for an unknown e-mail, and becomes NULL
-- when the user is deleted so that the audit trail outlives the account.
CREATE TABLE auth_events (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    email text,
    event_type text NOT NULL CHECK (event_type ~ '^[a-z][a-z_.]*$'),
    session_id uuid,
    ip inet,
    user_agent text,
    details jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX auth_events_created_idx ON auth_events (created_at DESC);
CREATE INDEX auth_events_user_idx ON auth_events (user_id, created_at DESC);
