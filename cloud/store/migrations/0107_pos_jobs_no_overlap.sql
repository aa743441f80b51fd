-- Never two jobs pulling the same resource of one configuration at once (issue 24): a scheduled
-- 'all' job queued at a process's start while a manual 'orders' job ran pulled the same orders
-- twice at the same time. The cloud runs as several processes on this database, so the rule is
-- the database's: a job becomes 'running' (claimed, or claimed again after its lease ran out)
-- only while no other running job of its configuration with a live lease shares one of its
-- steps. The check takes a per-configuration advisory lock first, held to the end of the
-- claiming transaction, so two processes claiming overlapping jobs at once are put in turn and
-- the second sees the first's claim. An overlapping job waits, queued, and is claimed once the
-- other has finished (or lost its lease). The claim query skips such jobs; this trigger is the
-- guarantee. It runs as the claimer (the system path, which sees every job).
CREATE FUNCTION pos_jobs_no_overlap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pos config ' || NEW.config_id::text));
    IF EXISTS (
        SELECT 1 FROM pos_jobs AS other
        WHERE other.config_id = NEW.config_id AND other.id <> NEW.id
          AND other.state = 'running' AND other.lease_until >= now()
          AND other.steps && NEW.steps
    ) THEN
        RAISE EXCEPTION 'POS job % overlaps a running job of configuration %',
            NEW.id, NEW.config_id
            USING ERRCODE = 'exclusion_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER pos_jobs_no_overlap BEFORE INSERT OR UPDATE OF state, lease_owner ON pos_jobs
    FOR EACH ROW WHEN (NEW.state = 'running') EXECUTE FUNCTION pos_jobs_no_overlap();
