-- Writers take the ids of the payments they copy from the payments
-- table's identity sequence (nextval), before copying the rows with them:
-- an insert that lets the column default take the id needs no right on the
-- sequence, an explicit nextval needs USAGE. db/roles.sql grants it to its
-- runtime role (on every sequence); a writer role set up otherwise (found
-- as migration 20 finds the writers: INSERT on payments) gets it here.

DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %I', pg_get_serial_sequence('payments', 'id'), r);
    END LOOP;
END $$;

---- create above / drop below ----

-- Nothing to take back: the right is harmless to the previous release,
-- and db/roles.sql grants it anyway.
SELECT 1;
