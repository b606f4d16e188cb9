-- Least privilege for the two kinds of role that are not the schema's
-- owner: the writers (db/roles.sql's runtime role) and the consumers
-- (db/roles.sql's consumer role, and the roles services used before it).
--
-- Writers may update, of the ledger, only what the code updates: a
-- payment's orphaned_at (poller cursor reset), by a column grant, and
-- nothing of rejected_logs. Through the default privileges of
-- db/roles.sql they could rewrite every column of payments (UPDATE
-- payments SET amount = amount * 1000). They get no right on the
-- consumers' tables either, which the poller never uses: moving a
-- consumer's offset back credits payments again.
--
-- Consumers are confined to their own names, by row-level security keyed
-- on the role: consumer_offsets.owner is the role a row belongs to (by
-- default the role that inserted it; a consumer may name another role it
-- is a member of, a group its rotating login roles share), and a role sees
-- and changes only the rows of roles it is a member of, or rows without an
-- owner: those made before this migration, until an operator sets one.
-- Chosen over a SECURITY DEFINER function per operation because the
-- consumers' statements stay what they are (the row lock a batch of
-- consume.Run holds in the handler's transaction, SKIP LOCKED, the
-- leases), and a consumer written in another language, reading and storing
-- its offset with its own SQL, is confined the same way. consumer_names
-- records the owner too, and stays readable by every consumer: a name
-- registered by another role is refused, not registered again.
--
-- Roles are found as in migrations 6 and 10, by what they may do: the
-- writers may insert payments. The consumers are the role db/roles.sql
-- marks as burnpoller's consumer role (by its comment) and the roles that
-- could write consumer_offsets before (the grants the documentation gave);
-- a role that may only read it (a reporting role, pg_read_all_data) is not
-- given writes. The schema's owner and superusers bypass all of it.
--
-- The functions that run with a policy, or as the schema's owner, fix
-- their search_path, with pg_temp last: a role that could put a table,
-- view or function of its own before the real one would otherwise be
-- asked instead.

SET LOCAL lock_timeout = '10s';

-- Whether the current role is owner or a member of it.
CREATE FUNCTION burnpoller_is_member(owner text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT owner OPERATOR(pg_catalog.=) CURRENT_USER
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                   WHERE r.rolname OPERATOR(pg_catalog.=) owner
                     AND pg_catalog.pg_has_role(r.oid, 'MEMBER'))
$$;

-- Existing rows get no owner; new ones the inserting role.
ALTER TABLE consumer_offsets ADD COLUMN owner text;
ALTER TABLE consumer_offsets ALTER COLUMN owner SET DEFAULT current_user;
ALTER TABLE consumer_names ADD COLUMN owner text;

COMMENT ON COLUMN consumer_offsets.owner IS 'The role the row belongs to (null: made before migration 20); only its members see and change the row.';
COMMENT ON COLUMN consumer_names.owner IS 'The role the name was registered for (null: before migration 20).';

CREATE OR REPLACE FUNCTION burnpoller_consumer_name_registered() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    INSERT INTO consumer_names (name, owner) VALUES (NEW.name, NEW.owner) ON CONFLICT (name) DO NOTHING;
    RETURN NULL;
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION burnpoller_consumer_name_registered() SET search_path = %I, pg_temp', current_schema());
END $$;

-- A role sees and changes the rows of roles it is a member of, and those
-- without an owner; it may insert a row only for a role it is a member of.
ALTER TABLE consumer_offsets ENABLE ROW LEVEL SECURITY;
CREATE POLICY consumer_offsets_own ON consumer_offsets
    USING (owner IS NULL OR burnpoller_is_member(owner))
    WITH CHECK (owner IS NULL OR burnpoller_is_member(owner));
CREATE POLICY consumer_offsets_insert_own ON consumer_offsets AS RESTRICTIVE FOR INSERT
    WITH CHECK (owner IS NOT NULL AND burnpoller_is_member(owner));
-- A name registered by another role is not taken by inserting its row
-- again once the row is gone.
CREATE POLICY consumer_offsets_registered ON consumer_offsets AS RESTRICTIVE FOR INSERT
    WITH CHECK (NOT EXISTS (SELECT 1 FROM consumer_names n
                            WHERE n.name = consumer_offsets.name AND n.owner IS DISTINCT FROM consumer_offsets.owner
                              AND n.owner IS NOT NULL));

ALTER TABLE consumer_names ENABLE ROW LEVEL SECURITY;
CREATE POLICY consumer_names_read ON consumer_names FOR SELECT USING (true);

DO $$
DECLARE
    r name;
BEGIN
    -- The writers.
    FOR r IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('REVOKE UPDATE ON payments, rejected_logs FROM %I', r);
        EXECUTE format('GRANT UPDATE (orphaned_at) ON payments TO %I', r);
        EXECUTE format('REVOKE ALL ON consumer_offsets, consumer_names FROM %I', r);
    END LOOP;
    -- The consumers: db/roles.sql's, and those that could write offsets
    -- before. They write the position, the lease and, on insert, the
    -- owner (checked by the policies); they delete nothing.
    FOR r IN
        SELECT rolname FROM pg_roles ro
        WHERE NOT rolsuper AND rolname <> current_user AND rolname NOT LIKE 'pg\_%'
          AND NOT has_table_privilege(oid, 'payments', 'INSERT')
          AND (has_table_privilege(oid, 'consumer_offsets', 'INSERT') OR has_table_privilege(oid, 'consumer_offsets', 'UPDATE')
               OR shobj_description(oid, 'pg_authid') = 'burnpoller consumer role')
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON consumer_offsets FROM %I', r);
        EXECUTE format('GRANT SELECT, INSERT (name, last_seq, event_id, history_hash, owner), '
                       'UPDATE (last_seq, event_id, history_hash, lease_owner, lease_until, updated_at) ON consumer_offsets TO %I', r);
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON consumer_names FROM %I', r);
        EXECUTE format('GRANT SELECT ON consumer_names, payment_events, burnpoller_schema_version TO %I', r);
    END LOOP;
END $$;

---- create above / drop below ----

SET LOCAL lock_timeout = '10s';
DROP POLICY consumer_names_read ON consumer_names;
ALTER TABLE consumer_names DISABLE ROW LEVEL SECURITY;
DROP POLICY consumer_offsets_registered ON consumer_offsets;
DROP POLICY consumer_offsets_insert_own ON consumer_offsets;
DROP POLICY consumer_offsets_own ON consumer_offsets;
ALTER TABLE consumer_offsets DISABLE ROW LEVEL SECURITY;
CREATE OR REPLACE FUNCTION burnpoller_consumer_name_registered() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    INSERT INTO consumer_names (name) VALUES (NEW.name) ON CONFLICT (name) DO NOTHING;
    RETURN NULL;
END $$;
ALTER TABLE consumer_names DROP COLUMN owner;
ALTER TABLE consumer_offsets DROP COLUMN owner;
DROP FUNCTION burnpoller_is_member(text);
