-- Expand: what lets a contract step (a migration that would break a
-- release older than the one bringing it; see docs/schema.md) wait until no
-- replica of an older release lives.
--
-- Every replica of this release on, with GROUPS or not, keeps a row in
-- replica_members naming the release it runs and the schema version its
-- binary brings (the writers' schema); the previous release's replicas,
-- which write no such columns, leave them NULL, and those without GROUPS
-- write no row at all (their sessions show them instead: they name
-- themselves 'burnpoller', 'burnpoller-session' and 'burnpoller-webhooks'
-- in pg_stat_activity, where this release and later ones add '/<schema>').
-- The previous release's statements on the table name their columns, so
-- new nullable ones break none of them.
--
-- schema_contracts records each contract step run: when, by which release
-- (the release an older replica still writing is told to roll to), and
-- whether an operator forced it while older replicas lived.

SET LOCAL lock_timeout = '500ms';

ALTER TABLE replica_members
    ADD COLUMN release text CHECK (length(release) <= 200),
    ADD COLUMN schema_version integer;

COMMENT ON COLUMN replica_members.release IS 'The release the replica runs (poller version), NULL for a release before schema 25.';
COMMENT ON COLUMN replica_members.schema_version IS 'The schema version the replica''s binary brings, NULL for a release before schema 25: a contract step waits while a live row is below it.';

CREATE TABLE schema_contracts (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    release    text        NOT NULL,
    forced     boolean     NOT NULL,
    older      text[]      NOT NULL DEFAULT '{}',
    applied_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE schema_contracts IS 'The contract steps applied: each retires the releases before its version; release is the one to roll to; forced, with the older replicas still live then, when an operator did not wait for them.';

-- The migrations write it; every role may read it (an older replica's
-- refusal reads the release to roll to from it), whatever default
-- privileges gave them.
GRANT SELECT ON schema_contracts TO PUBLIC;
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = 'public' AND g.table_name = 'schema_contracts'
          AND g.privilege_type <> 'SELECT'
          AND g.grantee <> current_user AND g.grantee <> 'PUBLIC'
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON schema_contracts FROM %I', r);
    END LOOP;
END $$;

---- create above / drop below ----

DROP TABLE schema_contracts;
ALTER TABLE replica_members DROP COLUMN release, DROP COLUMN schema_version;
