-- A webhook's deliveries follow its creator's access to the farm (0070). That access is an
-- ordinary permission now (0075), so "created the farm" no longer counts on its own: an admin
-- who reduces a farm creator's grant stops their webhooks' deliveries too.

-- Replacing the function needs the migrator to be a member of its owner, farm_sync, for a
-- moment (as 0070 does); the membership is dropped right after (a member would see every row).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'farm_sync', 'MEMBER') THEN
        EXECUTE format('GRANT farm_sync TO %I', current_user);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION webhook_creator_manages(creator uuid, farm uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT 1 FROM public.users AS u
        WHERE u.id = creator AND u.status = 'active'
          AND (u.role = 'admin'
               OR (u.role = 'farm_manager'
                   AND EXISTS (SELECT 1 FROM public.permissions AS p
                               WHERE p.user_id = u.id AND p.farm_id = farm
                                 AND p.permission_type = 'read_write')))
    )
$$;

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_catalog.pg_auth_members AS m
        WHERE m.roleid = 'farm_sync'::regrole AND m.member = current_user::regrole
    ) THEN
        EXECUTE format('REVOKE farm_sync FROM %I', current_user);
    END IF;
END
$$;
