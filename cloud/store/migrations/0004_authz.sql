-- Who is calling, and which farms they may read or write. See docs/cloud-rls.md.
--
-- The only thing taken from the connection is app.user_id, set per transaction by the service
-- (set_config('app.user_id', id, true)) from a verified token. The caller's role and status are
-- read from the users table, never from a setting. An unset, unknown or non-active user is
-- nobody: no rows.
--
-- The helpers that read users, farms and permissions are SECURITY DEFINER, owned by farm_authz
-- (which sees those tables through its own read-only policies), with a fixed search_path and
-- schema-qualified names, so a caller can neither widen what they read nor hijack a name.

-- farm_authz reads only the columns the helpers need.
GRANT SELECT (id, role, status) ON users TO farm_authz;
GRANT SELECT (id, user_id) ON farms TO farm_authz;
GRANT SELECT (user_id, farm_id, permission_type) ON permissions TO farm_authz;

CREATE FUNCTION authz.caller_id() RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT u.id
    FROM public.users AS u
    WHERE u.id = nullif(current_setting('app.user_id', true), '')::uuid
      AND u.status = 'active'
$$;

CREATE FUNCTION authz.caller_role() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT u.role FROM public.users AS u WHERE u.id = authz.caller_id()
$$;

CREATE FUNCTION authz.is_admin() RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(authz.caller_role() = 'admin', false)
$$;

-- Farms the caller created or holds any permission on.
CREATE FUNCTION authz.readable_farm_ids() RETURNS uuid[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH me AS (SELECT authz.caller_id() AS id)
    SELECT coalesce(array_agg(DISTINCT farm_id), '{}')
    FROM (
        SELECT f.id FROM public.farms AS f, me WHERE f.user_id = me.id
        UNION ALL
        SELECT p.farm_id FROM public.permissions AS p, me WHERE p.user_id = me.id
    ) AS readable (farm_id)
$$;

-- Farms the caller created or holds read_write on: the creator holds read_write on their farm.
CREATE FUNCTION authz.writable_farm_ids() RETURNS uuid[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH me AS (SELECT authz.caller_id() AS id)
    SELECT coalesce(array_agg(DISTINCT farm_id), '{}')
    FROM (
        SELECT f.id FROM public.farms AS f, me WHERE f.user_id = me.id
        UNION ALL
        SELECT p.farm_id FROM public.permissions AS p, me
        WHERE p.user_id = me.id AND p.permission_type = 'read_write'
    ) AS writable (farm_id)
$$;

-- Refuses changes to the listed columns unless the caller is an admin. Applies to the user path
-- only (members of farm_app); the system path, superusers and the table owner (which runs
-- foreign-key actions such as ON DELETE SET NULL) are not restricted. Used as a BEFORE UPDATE
-- trigger with the column names as arguments.
CREATE FUNCTION authz.guard_admin_columns() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    column_name text;
BEGIN
    IF NOT pg_has_role(current_user, 'farm_app', 'USAGE')
       OR (SELECT r.rolsuper FROM pg_roles AS r WHERE r.rolname = current_user) THEN
        RETURN NEW;
    END IF;
    IF authz.is_admin() THEN
        RETURN NEW;
    END IF;
    FOREACH column_name IN ARRAY TG_ARGV LOOP
        IF to_jsonb(NEW) -> column_name IS DISTINCT FROM to_jsonb(OLD) -> column_name THEN
            RAISE EXCEPTION 'only an administrator may change %.%', TG_TABLE_NAME, column_name
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
    RETURN NEW;
END
$$;

-- ALTER ... OWNER needs the migrator to be a member of the new owner. The membership is dropped
-- again right after: a member of farm_authz would inherit its read-all policies and so see every
-- user and farm despite FORCE ROW LEVEL SECURITY.
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'farm_authz', 'MEMBER') THEN
        EXECUTE format('GRANT farm_authz TO %I', current_user);
    END IF;
END
$$;

ALTER FUNCTION authz.caller_id() OWNER TO farm_authz;
ALTER FUNCTION authz.caller_role() OWNER TO farm_authz;
ALTER FUNCTION authz.is_admin() OWNER TO farm_authz;
ALTER FUNCTION authz.readable_farm_ids() OWNER TO farm_authz;
ALTER FUNCTION authz.writable_farm_ids() OWNER TO farm_authz;

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_auth_members AS m
        WHERE m.roleid = 'farm_authz'::regrole AND m.member = current_user::regrole
    ) THEN
        EXECUTE format('REVOKE farm_authz FROM %I', current_user);
    END IF;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA authz FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA authz TO farm_app, farm_sync, farm_authz;

CREATE TRIGGER users_admin_columns
    BEFORE UPDATE ON users
    FOR EACH ROW
    EXECUTE FUNCTION authz.guard_admin_columns(
        'id', 'role', 'status', 'plan', 'email_verified', 'failed_logins', 'locked_until'
    );

-- Creator and agent of a farm change only by an admin or the sync path; otherwise a holder of
-- read_write could make themselves the creator.
CREATE TRIGGER farms_admin_columns
    BEFORE UPDATE ON farms
    FOR EACH ROW
    EXECUTE FUNCTION authz.guard_admin_columns('id', 'user_id', 'agent_id');
