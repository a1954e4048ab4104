-- Privileges: users reach memory only through the public functions, which
-- check their caller themselves. Tables are granted to nobody; internal
-- helpers (memory._*) and the default permission check are not executable
-- by PUBLIC.

REVOKE ALL ON ALL TABLES IN SCHEMA memory FROM PUBLIC;

DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc p
        WHERE p.pronamespace = 'memory'::regnamespace AND p.proname LIKE '\_%'
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION memory.has_permission(uuid, uuid, text) FROM PUBLIC;
