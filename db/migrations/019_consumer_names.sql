-- Consumers (the consume package) remember every name that ever had an
-- offset, and offsets carry the history of the event they name.
--
-- consumer_names: a consumer whose consumer_offsets row is gone (deleted by
-- hand, a restore, a bad script) stopped with ErrNoOffset, but its next
-- start registered the name afresh at its start position and handed every
-- event over again: every payment credited twice. A name is now recorded
-- here when its offset row is first created (by a trigger, whoever creates
-- it), and a consumer that finds its name here without an offset row
-- refuses to start until someone sets the offset (consume.Reset). Names
-- that exist already are recorded by this migration.
--
-- consumer_offsets.history_hash: the history_hash (migration 18) of the
-- event at last_seq when the offset was stored, checked with the event_id
-- before each batch: an offset whose event is still at its seq but whose
-- events below it were numbered again is told apart too.

SET LOCAL lock_timeout = '10s';

CREATE TABLE consumer_names (
    name          text        PRIMARY KEY CHECK (name <> ''),
    registered_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE consumer_names IS 'Every consumer name that ever had an offset: a name here without a consumer_offsets row refuses to start until its offset is set (consume.Reset).';

INSERT INTO consumer_names (name, registered_at) SELECT name, updated_at FROM consumer_offsets;

-- Runs as the schema's owner, so that a consumer needs no right on
-- consumer_names beyond reading it; its search_path is this schema, then
-- pg_temp (last: a caller's temporary table must not stand in for ours).
CREATE FUNCTION burnpoller_consumer_name_registered() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    INSERT INTO consumer_names (name) VALUES (NEW.name) ON CONFLICT (name) DO NOTHING;
    RETURN NULL;
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION burnpoller_consumer_name_registered() SET search_path = %I, pg_temp', current_schema());
END $$;

REVOKE ALL ON FUNCTION burnpoller_consumer_name_registered() FROM PUBLIC;

CREATE TRIGGER consumer_offsets_name_registered
    AFTER INSERT ON consumer_offsets
    FOR EACH ROW EXECUTE FUNCTION burnpoller_consumer_name_registered();

-- The check reads the table under its lock: one row per consumer.
ALTER TABLE consumer_offsets ADD COLUMN history_hash bytea CHECK (octet_length(history_hash) = 32);

-- Every role that may register a consumer may read the names.
DO $$
DECLARE
    consumer name;
BEGIN
    FOR consumer IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'consumer_offsets', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT ON consumer_names TO %I', consumer);
    END LOOP;
END $$;

---- create above / drop below ----

SET LOCAL lock_timeout = '10s';
ALTER TABLE consumer_offsets DROP COLUMN history_hash;
DROP TRIGGER consumer_offsets_name_registered ON consumer_offsets;
DROP FUNCTION burnpoller_consumer_name_registered();
DROP TABLE consumer_names;
