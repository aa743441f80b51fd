-- Mailed tokens belong to the address they were mailed to: when a user's e-mail changes, the
-- unused verification and reset tokens of the old address die (a reset mailed to a lost mailbox
-- must not take the account over after the user moved away from it). Runs as the caller: the
-- user path may update its own tokens, an admin anyone's (0005).
CREATE FUNCTION users_expire_mailed_tokens() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    UPDATE one_time_tokens SET used_at = now()
     WHERE user_id = NEW.id AND used_at IS NULL
       AND purpose IN ('verify_email', 'reset_password');
    RETURN NULL;
END
$$;

CREATE TRIGGER users_expire_mailed_tokens
    AFTER UPDATE OF email ON users
    FOR EACH ROW
    WHEN (NEW.email IS DISTINCT FROM OLD.email)
    EXECUTE FUNCTION users_expire_mailed_tokens();
