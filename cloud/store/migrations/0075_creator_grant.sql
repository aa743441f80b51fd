-- A farm's creator held read_write through the policies themselves (0004, 0005), so no admin
-- could reduce it. It is now an ordinary permission row, made with the farm, that admins may
-- change or revoke (as on the agent, its migration 0020). See docs/cloud-rls.md.
--
-- * The grant is made by an AFTER INSERT trigger on farms, whichever path inserts the farm (a
--   farm manager on the user path, the sync mirroring an agent's farm): same statement, same
--   transaction. It runs as the schema owner (SECURITY DEFINER), which may insert into
--   permissions only rows of that shape (the policy creator_grant). An admin creator gets no
--   grant: their role already reaches every farm.
-- * The policies and helpers no longer read farms.user_id. One exception keeps
--   INSERT ... RETURNING working for a farm manager: PostgreSQL checks the SELECT policy on the
--   new row before the row (and so before the trigger's grant) exists. A farm is visible to its
--   creator within the transaction that inserts it, told by created_xact, the inserting
--   transaction's id (64-bit, never reused); from the next statement on the grant decides.

ALTER TABLE farms ADD COLUMN created_xact xid8;
ALTER TABLE farms ALTER COLUMN created_xact SET DEFAULT pg_current_xact_id();

-- Creator grants of the farms there are; a creator who holds a grant on their farm already keeps
-- it as it is (as on the agent). The migrator (the schema owner, subject to row-level security
-- like everyone) may insert only grants of that shape, and reads farms, users and permissions
-- here through three policies dropped right after.
CREATE POLICY creator_grant ON permissions FOR INSERT TO CURRENT_USER
    WITH CHECK (permission_type = 'read_write' AND resource_type = 'farm'
                AND granted_by = user_id);
CREATE POLICY migrate_creators ON farms FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY migrate_creators ON users FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY migrate_creators ON permissions FOR SELECT TO CURRENT_USER USING (true);
INSERT INTO permissions (user_id, farm_id, permission_type, granted_at, granted_by)
SELECT f.user_id, f.id, 'read_write', f.created_at, f.user_id
FROM farms AS f JOIN users AS u ON u.id = f.user_id
WHERE u.role <> 'admin'
  AND NOT EXISTS (SELECT 1 FROM permissions AS p WHERE p.user_id = f.user_id AND p.farm_id = f.id);
DROP POLICY migrate_creators ON farms;
DROP POLICY migrate_creators ON users;
DROP POLICY migrate_creators ON permissions;

-- Replacing and owning the helpers needs membership of farm_authz, dropped again right after
-- (see 0004: a member would inherit its read-all policies).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'farm_authz', 'MEMBER') THEN
        EXECUTE format('GRANT farm_authz TO %I', current_user);
    END IF;
END
$$;

-- Whether a user is an admin, for the trigger below: farm_authz reads users(id, role) already.
CREATE FUNCTION authz.is_admin_user(user_id uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT u.role = 'admin' FROM public.users AS u WHERE u.id = user_id), false)
$$;

-- Farms the caller holds any permission on; the creator is no longer special.
CREATE OR REPLACE FUNCTION authz.readable_farm_ids() RETURNS uuid[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT p.farm_id), '{}')
    FROM public.permissions AS p
    WHERE p.user_id = authz.caller_id()
$$;

-- Farms the caller holds read_write on.
CREATE OR REPLACE FUNCTION authz.writable_farm_ids() RETURNS uuid[]
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT p.farm_id), '{}')
    FROM public.permissions AS p
    WHERE p.user_id = authz.caller_id() AND p.permission_type = 'read_write'
$$;

ALTER FUNCTION authz.is_admin_user(uuid) OWNER TO farm_authz;
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
REVOKE ALL ON FUNCTION authz.is_admin_user(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION authz.is_admin_user(uuid) TO CURRENT_USER;

CREATE FUNCTION grant_farm_creator() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.user_id IS NOT NULL AND NOT authz.is_admin_user(NEW.user_id) THEN
        INSERT INTO public.permissions (user_id, farm_id, permission_type, granted_by)
        VALUES (NEW.user_id, NEW.id, 'read_write', NEW.user_id);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION grant_farm_creator() FROM PUBLIC;

CREATE TRIGGER farms_creator_grant
    AFTER INSERT ON farms
    FOR EACH ROW
    EXECUTE FUNCTION grant_farm_creator();

-- Farms: read with any grant, write with read_write, as every table below a farm. A farm
-- manager still creates farms as their own creator only; created_xact is the inserting
-- transaction's (checked here, and only an admin may change it afterwards).
DROP POLICY member_select ON farms;
DROP POLICY member_insert ON farms;
DROP POLICY member_update ON farms;
DROP POLICY member_delete ON farms;
CREATE POLICY member_select ON farms FOR SELECT TO farm_app
    USING (
        (SELECT authz.is_admin())
        OR id = ANY ((SELECT authz.readable_farm_ids())::uuid[])
        OR (user_id = (SELECT authz.caller_id())
            AND created_xact = (SELECT pg_current_xact_id_if_assigned()))
    );
CREATE POLICY member_insert ON farms FOR INSERT TO farm_app
    WITH CHECK (
        (SELECT authz.is_admin())
        OR (user_id = (SELECT authz.caller_id())
            AND (SELECT authz.caller_role()) = 'farm_manager'
            AND created_xact = (SELECT pg_current_xact_id_if_assigned()))
    );
CREATE POLICY member_update ON farms FOR UPDATE TO farm_app
    USING ((SELECT authz.is_admin()) OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[]))
    WITH CHECK (
        (SELECT authz.is_admin()) OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[])
    );
CREATE POLICY member_delete ON farms FOR DELETE TO farm_app
    USING ((SELECT authz.is_admin()) OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[]));

DROP TRIGGER farms_admin_columns ON farms;
CREATE TRIGGER farms_admin_columns
    BEFORE UPDATE ON farms
    FOR EACH ROW
    EXECUTE FUNCTION authz.guard_admin_columns('id', 'user_id', 'agent_id', 'created_xact');
