-- The notification history for people (GET /api/v1/notifications): the name of a message's
-- contact point, for the farms they may read. Only the columns that say what a contact point
-- is; its sealed URL stays the system path's.

GRANT SELECT (id, farm_id, name, service, enabled) ON public.contact_points TO farm_app;
CREATE POLICY member_read ON public.contact_points FOR SELECT TO farm_app
    USING ((SELECT authz.is_admin())
           OR farm_id = ANY ((SELECT authz.readable_farm_ids())::uuid[]));
