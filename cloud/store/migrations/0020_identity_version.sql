-- The cloud's identity version (issue 16, docs/architecture.md "Identity"): a counter that
-- grows with every committed change to what an agent's identity delta is made of. Each delta
-- carries the version of the snapshot it was read in, and an agent applies only a delta newer
-- than the one it holds, so a slow answer can never roll a revocation back.
--
-- The bump is a deferred constraint trigger: it runs at commit, after every other lock of the
-- transaction is taken, so two identity changes never deadlock on the counter, and the counter's
-- row lock orders commits: a snapshot that sees version N sees every change up to N.
-- A transaction bumps at most once (a transaction-local flag), however many rows it touched.

CREATE TABLE identity_clock (
    id integer PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL CHECK (version >= 1)
);
INSERT INTO identity_clock (id, version) VALUES (1, 1);

-- A counter, no user data. The system path reads it with the delta; the service roles never
-- write it themselves: the bump below runs as the table's owner (SECURITY DEFINER, fixed
-- search_path, one fixed statement), whoever's change fires it.
ALTER TABLE identity_clock ENABLE ROW LEVEL SECURITY;
ALTER TABLE identity_clock FORCE ROW LEVEL SECURITY;
CREATE POLICY identity_clock_all ON identity_clock USING (true) WITH CHECK (true);
GRANT SELECT ON identity_clock TO farm_sync;

CREATE FUNCTION identity_clock_bump() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF coalesce(current_setting('farm.identity_bumped', true), '') = 'yes' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('farm.identity_bumped', 'yes', true);
    UPDATE public.identity_clock SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

-- What the delta reads (cloud/store/sync_identity.py): users' login fields, permissions,
-- sessions' lifetimes, API keys, and which farms and owner an agent has.
CREATE CONSTRAINT TRIGGER identity_clock_users_write AFTER INSERT OR DELETE ON users
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_users_update
    AFTER UPDATE OF email, password_hash, role, plan, status, mfa_enabled ON users
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.email, OLD.password_hash, OLD.role, OLD.plan, OLD.status, OLD.mfa_enabled)
          IS DISTINCT FROM
          (NEW.email, NEW.password_hash, NEW.role, NEW.plan, NEW.status, NEW.mfa_enabled))
    EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_permissions AFTER INSERT OR UPDATE OR DELETE
    ON permissions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_sessions_write AFTER INSERT OR DELETE ON sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_sessions_update
    AFTER UPDATE OF expires_at, revoked_at ON sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.expires_at, OLD.revoked_at) IS DISTINCT FROM (NEW.expires_at, NEW.revoked_at))
    EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_api_keys_write AFTER INSERT OR DELETE ON api_keys
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_api_keys_update
    AFTER UPDATE OF expires_at, revoked_at ON api_keys
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.expires_at, OLD.revoked_at) IS DISTINCT FROM (NEW.expires_at, NEW.revoked_at))
    EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_farms_write AFTER INSERT OR DELETE ON farms
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_farms_update AFTER UPDATE OF agent_id, user_id ON farms
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.agent_id, OLD.user_id) IS DISTINCT FROM (NEW.agent_id, NEW.user_id))
    EXECUTE FUNCTION identity_clock_bump();
CREATE CONSTRAINT TRIGGER identity_clock_agents_update AFTER UPDATE OF owner_id ON agents
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id)
    EXECUTE FUNCTION identity_clock_bump();
