-- The replicas of replica sets that serve named groups (GROUPS), for the
-- work spread (package spread): each replica keeps a row of its own, beats
-- it every second or so, and names in it the groups (cursor ids) it
-- serves; every replica reads the live rows and computes the same
-- preferred holder of each group. The preference is advice: the cursor
-- lock still decides who writes, and a replica takes over a group whose
-- holder stopped reading it whatever the rows say.
--
-- Nothing here is held across a round trip: a replica writes its own row
-- in a statement of its own, and reads the others' without locking them.

SET LOCAL lock_timeout = '10s';

CREATE TABLE replica_members (
    id           text        PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    groups       text[]      NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE replica_members IS 'Replicas serving named groups (GROUPS) and the groups (cursor ids) each serves, beaten by each replica; read to spread the groups over the live replicas. Advice only: the cursor lock decides who writes.';

-- The writers (found as migration 20 finds them) remove their own row at
-- stop, and rows of replicas gone for a day.
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON replica_members TO %I', r);
    END LOOP;
END $$;

---- create above / drop below ----

DROP TABLE replica_members;
