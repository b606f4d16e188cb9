-- The schema version is the migrations' to write. Roles that got write
-- access through default privileges (the runtime role of db/roles.sql) keep
-- SELECT only.
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = 'public' AND g.table_name = 'burnpoller_schema_version'
          AND g.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
          AND g.grantee <> current_user AND g.grantee <> 'PUBLIC'
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.burnpoller_schema_version FROM %I', grantee);
    END LOOP;
END $$;

---- create above / drop below ----
