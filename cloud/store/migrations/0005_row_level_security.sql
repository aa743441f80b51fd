-- Row-level security on every table that holds user data. See docs/cloud-rls.md.
--
-- RLS is enabled and FORCED (the owner is subject to it too). Policies are permissive and name
-- the role they serve: farm_app (user path, keyed on authz.caller_id()), farm_sync (system path,
-- everything), farm_authz (the helpers' read-only view). A role without a policy sees nothing.
-- Helper calls are wrapped in (SELECT ...) so they run once per statement, not once per row; the
-- ::uuid[] cast makes `x = ANY ((SELECT array)::uuid[])` compare with the array's elements
-- rather than treat the parenthesised SELECT as a subquery of arrays.

DO $$
DECLARE
    table_name text;
BEGIN
    FOREACH table_name IN ARRAY ARRAY[
        'users', 'sessions', 'refresh_tokens', 'api_keys', 'one_time_tokens', 'auth_events',
        'agents', 'sync_receipts', 'farms', 'permissions',
        'rows', 'racks', 'shelves', 'devices', 'readings', 'rollups', 'events', 'calibrations',
        'grow_plans', 'climate_settings'
    ] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', table_name);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', table_name);
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_sync', table_name
        );
        EXECUTE format(
            'CREATE POLICY system_all ON public.%I FOR ALL TO farm_sync'
            ' USING (true) WITH CHECK (true)',
            table_name
        );
    END LOOP;
END
$$;

-- The helpers' view: all rows, and only the columns granted in 0004.
CREATE POLICY authz_read ON users FOR SELECT TO farm_authz USING (true);
CREATE POLICY authz_read ON farms FOR SELECT TO farm_authz USING (true);
CREATE POLICY authz_read ON permissions FOR SELECT TO farm_authz USING (true);

-- users: your own row; admins all. Only admins create or delete users (registration is the
-- system path); which columns a non-admin may change is guarded by users_admin_columns.
GRANT SELECT, INSERT, UPDATE, DELETE ON users TO farm_app;
CREATE POLICY self_select ON users FOR SELECT TO farm_app
    USING (id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY self_update ON users FOR UPDATE TO farm_app
    USING (id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()))
    WITH CHECK (id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY admin_insert ON users FOR INSERT TO farm_app
    WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_delete ON users FOR DELETE TO farm_app
    USING ((SELECT authz.is_admin()));

-- Identity secrets: only their user's rows, or an admin.
DO $$
DECLARE
    table_name text;
BEGIN
    FOREACH table_name IN ARRAY ARRAY['sessions', 'refresh_tokens', 'one_time_tokens'] LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_app', table_name);
        EXECUTE format(
            'CREATE POLICY owner_all ON public.%I FOR ALL TO farm_app'
            ' USING (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()))'
            ' WITH CHECK (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()))',
            table_name
        );
    END LOOP;
END
$$;

-- API keys: their user reads them; only admins create, revoke or delete (docs/design.md, section 4).
GRANT SELECT, INSERT, UPDATE, DELETE ON api_keys TO farm_app;
CREATE POLICY owner_select ON api_keys FOR SELECT TO farm_app
    USING (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY admin_insert ON api_keys FOR INSERT TO farm_app
    WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_update ON api_keys FOR UPDATE TO farm_app
    USING ((SELECT authz.is_admin())) WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_delete ON api_keys FOR DELETE TO farm_app
    USING ((SELECT authz.is_admin()));

-- Authentication events: append-only for the user path (no UPDATE or DELETE granted).
GRANT SELECT, INSERT ON auth_events TO farm_app;
CREATE POLICY owner_select ON auth_events FOR SELECT TO farm_app
    USING (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY owner_insert ON auth_events FOR INSERT TO farm_app
    WITH CHECK (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));

-- Agents: admins create and pair them; an owner may read theirs. Sync receipts are the system
-- path's alone (no grant to farm_app).
GRANT SELECT, INSERT, UPDATE, DELETE ON agents TO farm_app;
CREATE POLICY owner_select ON agents FOR SELECT TO farm_app
    USING (owner_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY admin_insert ON agents FOR INSERT TO farm_app
    WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_update ON agents FOR UPDATE TO farm_app
    USING ((SELECT authz.is_admin())) WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_delete ON agents FOR DELETE TO farm_app
    USING ((SELECT authz.is_admin()));

-- Permissions: visible to the user they concern and to admins; only admins grant and revoke.
GRANT SELECT, INSERT, UPDATE, DELETE ON permissions TO farm_app;
CREATE POLICY subject_select ON permissions FOR SELECT TO farm_app
    USING (user_id = (SELECT authz.caller_id()) OR (SELECT authz.is_admin()));
CREATE POLICY admin_insert ON permissions FOR INSERT TO farm_app
    WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_update ON permissions FOR UPDATE TO farm_app
    USING ((SELECT authz.is_admin())) WITH CHECK ((SELECT authz.is_admin()));
CREATE POLICY admin_delete ON permissions FOR DELETE TO farm_app
    USING ((SELECT authz.is_admin()));

-- Farms: read if created or permitted; write if created or read_write. The creator test is also
-- made on the row itself so that INSERT ... RETURNING sees the farm just created. Creating a farm
-- is for farm managers (as its creator) and admins.
GRANT SELECT, INSERT, UPDATE, DELETE ON farms TO farm_app;
CREATE POLICY member_select ON farms FOR SELECT TO farm_app
    USING (
        (SELECT authz.is_admin())
        OR user_id = (SELECT authz.caller_id())
        OR id = ANY ((SELECT authz.readable_farm_ids())::uuid[])
    );
CREATE POLICY member_insert ON farms FOR INSERT TO farm_app
    WITH CHECK (
        (SELECT authz.is_admin())
        OR (user_id = (SELECT authz.caller_id()) AND (SELECT authz.caller_role()) = 'farm_manager')
    );
CREATE POLICY member_update ON farms FOR UPDATE TO farm_app
    USING (
        (SELECT authz.is_admin())
        OR user_id = (SELECT authz.caller_id())
        OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[])
    )
    WITH CHECK (
        (SELECT authz.is_admin())
        OR user_id = (SELECT authz.caller_id())
        OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[])
    );
CREATE POLICY member_delete ON farms FOR DELETE TO farm_app
    USING (
        (SELECT authz.is_admin())
        OR user_id = (SELECT authz.caller_id())
        OR id = ANY ((SELECT authz.writable_farm_ids())::uuid[])
    );

-- Everything below a farm follows the farm: the same four policies on farm_id.
DO $$
DECLARE
    table_name text;
    can_read constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.readable_farm_ids())::uuid[])';
    can_write constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.writable_farm_ids())::uuid[])';
BEGIN
    FOREACH table_name IN ARRAY ARRAY[
        'rows', 'racks', 'shelves', 'devices', 'readings', 'rollups', 'events', 'calibrations',
        'grow_plans', 'climate_settings'
    ] LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_app', table_name);
        EXECUTE format(
            'CREATE POLICY member_select ON public.%I FOR SELECT TO farm_app USING (%s)',
            table_name, can_read
        );
        EXECUTE format(
            'CREATE POLICY member_insert ON public.%I FOR INSERT TO farm_app WITH CHECK (%s)',
            table_name, can_write
        );
        EXECUTE format(
            'CREATE POLICY member_update ON public.%I FOR UPDATE TO farm_app'
            ' USING (%s) WITH CHECK (%s)',
            table_name, can_write, can_write
        );
        EXECUTE format(
            'CREATE POLICY member_delete ON public.%I FOR DELETE TO farm_app USING (%s)',
            table_name, can_write
        );
    END LOOP;
END
$$;
