-- Writers of a contract keep each other apart with a row lock on the
-- contract's row here (payments.Tx.LockWriters), held to the end of their
-- range transaction. A row lock needs UPDATE on the table, and only the
-- writers get it: the advisory lock the writers took before (keyed on
-- public data) could be taken by any role, since PUBLIC may call
-- pg_advisory_lock, and held by a session outside any transaction, where
-- no timeout ends it, stopping every writer of the contract.
--
-- Expand only: the previous release's writers go on taking the advisory
-- lock, and the writers of this release take it too (when its holder is a
-- writer) until every replica runs this release or a later one.

SET LOCAL lock_timeout = '500ms';

CREATE TABLE writer_locks (
    chain_id bigint NOT NULL,
    contract text   NOT NULL CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$'),
    PRIMARY KEY (chain_id, contract)
);

COMMENT ON TABLE writer_locks IS 'One row per contract a writer has recorded; a range transaction locks its contracts'' rows (FOR UPDATE) to keep the other writers of those contracts out until it ends. Only the writers may lock them.';

-- The writers (found as migration 20 finds them: INSERT on payments) add
-- a contract's row the first time and lock it; every other role, the
-- consumers' included, gets nothing, whatever default privileges gave it.
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = 'public' AND g.table_name = 'writer_locks'
          AND g.grantee <> current_user AND g.grantee <> 'PUBLIC'
    LOOP
        EXECUTE format('REVOKE ALL ON writer_locks FROM %I', r);
    END LOOP;
    FOR r IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON writer_locks TO %I', r);
    END LOOP;
END $$;

---- create above / drop below ----

DROP TABLE writer_locks;
