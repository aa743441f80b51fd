-- Database roles and the authz schema. See docs/cloud-rls.md.
--
-- farm_app    the service's connection for everything done on behalf of a user; every row it
--             touches passes a row-level security policy keyed on app.user_id.
-- farm_sync   the system path (sync apply, login before a user is known, identity delta): a
--             separate credential used only by db.as_system(); its access is also granted by
--             explicit policies, never by BYPASSRLS.
-- farm_authz  owns the SECURITY DEFINER helpers that read users, farms and permissions; it has
--             no LOGIN and only SELECT on the columns those helpers need.
--
-- None of them is a superuser, has BYPASSRLS, or owns a table. They are created NOLOGIN; the
-- operator gives farm_app and farm_sync LOGIN and a password (docs/cloud-rls.md).

-- Roles are cluster-wide: several databases of one cluster may migrate at the same moment, so a
-- role created meanwhile by someone else is not an error.
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['farm_app', 'farm_sync', 'farm_authz'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format(
                    'CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE',
                    role_name
                );
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END
$$;

CREATE SCHEMA authz;
REVOKE ALL ON SCHEMA authz FROM PUBLIC;
GRANT USAGE ON SCHEMA authz TO farm_app, farm_sync, farm_authz;
-- Lets a non-superuser migrator hand the helper functions over to farm_authz (ALTER ... OWNER
-- requires the new owner to be able to create in the schema). farm_authz cannot log in.
GRANT CREATE ON SCHEMA authz TO farm_authz;

GRANT USAGE ON SCHEMA public TO farm_app, farm_sync, farm_authz;
