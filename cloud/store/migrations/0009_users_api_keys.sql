-- User management on the cloud (docs/design.md, sections 4 and 12).

-- Every change of a user row stamps updated_at, a new password stamps password_changed_at, and a
-- changed e-mail address is unverified unless the same statement sets email_verified itself (an
-- admin may). A trigger rather than
-- the service: a non-admin may not write email_verified (users_admin_columns), yet changing
-- their own address must reset it. Triggers fire in name order, so this one runs after
-- users_admin_columns has checked the statement as written.
CREATE FUNCTION users_touch() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.updated_at := now();
    IF NEW.password_hash IS DISTINCT FROM OLD.password_hash THEN
        NEW.password_changed_at := now();
    END IF;
    IF NEW.email IS DISTINCT FROM OLD.email
       AND NEW.email_verified IS NOT DISTINCT FROM OLD.email_verified THEN
        NEW.email_verified := false;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER users_touch
    BEFORE UPDATE ON users
    FOR EACH ROW
    EXECUTE FUNCTION users_touch();

-- API key authentication looks keys up by hash on every request (UNIQUE already indexes it);
-- listings page keys newest first.
CREATE INDEX api_keys_created_idx ON api_keys (created_at DESC);
