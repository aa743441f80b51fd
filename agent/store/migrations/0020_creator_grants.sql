-- A farm's creator held read_write implicitly; it is now an ordinary permission row, made at
-- creation, that admins may change or revoke. Existing creators get theirs (an id shaped like a
-- version-4 UUID, as the API writes them); the outbox trigger sends each to the cloud.
INSERT INTO permissions (id, user_id, farm_id, permission_type, resource_type, granted_at,
                         granted_by)
SELECT lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
           || substr(lower(hex(randomblob(2))), 2) || '-'
           || substr('89ab', 1 + (abs(random()) % 4), 1)
           || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))),
       f.created_by, f.id, 'read_write', 'farm', f.created_at, f.created_by
FROM farms AS f
WHERE f.created_by IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM permissions AS p WHERE p.user_id = f.created_by AND p.farm_id = f.id);
