-- Mailed tokens belong to the address they were mailed to: when a user's e-mail changes, the
-- unused verification and reset tokens of the old address die (a reset mailed to a lost mailbox
-- must not take the account over after the user moved away from it). The same rule as the
-- cloud's migration 0011.
CREATE TRIGGER users_expire_mailed_tokens AFTER UPDATE OF email ON users
WHEN NEW.email IS NOT OLD.email
BEGIN
    UPDATE one_time_tokens SET used_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     WHERE user_id = NEW.id AND used_at IS NULL
       AND purpose IN ('verify_email', 'reset_password');
END;
