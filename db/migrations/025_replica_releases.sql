-- Expand: what lets a contract step (a migration that would break a
-- release older than the one bringing it; see docs/schema.md) wait until no
-- replica of an older release lives, and then retire it.
--
-- Every replica of this release on, with GROUPS or not, keeps a row in
-- replica_members naming the release it runs and the schema version its
-- binary brings (the writers' schema); the previous release's replicas,
-- which write no such columns, leave them NULL, and those without GROUPS
-- write no row at all. Their sessions show them (they name themselves
-- 'burnpoller', 'burnpoller-session' and 'burnpoller-webhooks' in
-- pg_stat_activity, where this release and later ones add '/<schema>'),
-- and, since a session may be gone for a moment (a reconnect) or renamed
-- (a transaction pooler hands its server connection to another client),
-- so do their commits: burnpoller_commit_ledger(), which every writing
-- transaction runs inside its COMMIT, notes in release_sightings when a
-- burnpoller session that declares no writer schema last committed.
-- The previous release's statements on replica_members name their
-- columns, so new nullable ones break none of them, and its commits run
-- the same function as before, with the note added.
--
-- schema_contracts records each contract step run: when, by which release
-- (the release an older replica still writing is told to roll to), and
-- whether an operator forced it while older replicas lived. The newest
-- one retires the releases whose writers declare a schema below its
-- version: burnpoller_commit_ledger() refuses their commits. Replacing a
-- function takes no lock any other session can hold: no role can hold
-- this step, or a contract step, back.

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

COMMENT ON TABLE schema_contracts IS 'The contract steps applied: the newest retires the releases whose writers declare a schema below its version; release is the one to roll to; forced, with the older replicas still live then (older), when an operator did not wait for them.';

CREATE TABLE release_sightings (
    writer_schema  integer     PRIMARY KEY CHECK (writer_schema >= 0),
    last_commit_at timestamptz NOT NULL
);

COMMENT ON TABLE release_sightings IS 'When a burnpoller session declaring no writer schema (0: a release before schema 26) last committed a write of the ledger: a contract step waits while that is recent.';

-- The migrations write schema_contracts, and every role may read it (a
-- retired writer's refusal reads the release to roll to from it); the
-- writers (found as migration 20 finds them: INSERT on payments) note
-- their commits in release_sightings, which no other role may touch,
-- whatever default privileges gave them.
GRANT SELECT ON schema_contracts TO PUBLIC;
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = 'public' AND g.table_name IN ('schema_contracts', 'release_sightings')
          AND g.grantee <> current_user AND g.grantee <> 'PUBLIC'
    LOOP
        EXECUTE format('REVOKE ALL ON release_sightings FROM %I', r);
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON schema_contracts FROM %I', r);
    END LOOP;
    FOR r IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON release_sightings TO %I', r);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql
-- Compiling the statements below costs more than running them. The staged
-- tables' statistics say little (their rows live for one transaction, their
-- dead rows until vacuum): the transaction's own rows are found by the index
-- on xact, never by reading the tables whole.
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    me        xid8 := pg_current_xact_id();
    head      record;
    again     record;
    staged    boolean := false;
    last      bigint;
    prior     bytea;
    moved     bigint;
    nth       integer;
    candidate text;
    violated  text;
    speaks    integer;
    retired   integer;
    roll_to   text;
BEGIN
    -- Expand, then contract (migrations 25, 26; docs/schema.md). A
    -- burnpoller session that does not declare the schema it writes (SET
    -- LOCAL burnpoller.writer_schema, which writers send with their BEGIN
    -- from schema 26 on) runs a release before it. Until a contract step
    -- retires its release, its commits are seen (release_sightings: a
    -- replica of a release that writes no replica_members row, behind a
    -- pooler that renames its sessions, still shows); once one has, they
    -- are refused, the whole transaction with them, naming the release to
    -- roll to. Other programs' sessions are not burnpoller's.
    IF current_setting('application_name') LIKE 'burnpoller%' THEN
        speaks := CASE WHEN current_setting('burnpoller.writer_schema', true) ~ '^[0-9]{1,9}$'
                       THEN current_setting('burnpoller.writer_schema', true)::integer ELSE 0 END;
        SELECT c.version, c.release INTO retired, roll_to FROM schema_contracts c ORDER BY c.version DESC LIMIT 1;
        IF speaks < retired THEN
            RAISE EXCEPTION 'this burnpoller release is retired: the database''s schema contract step % refuses writers of releases before schema % (this one declares %); roll this replica to burnpoller % or later',
                retired, retired, CASE WHEN speaks = 0 THEN 'none' ELSE speaks::text END, roll_to
                USING ERRCODE = 'BPRET',
                      HINT = 'poller version names a replica''s release; see docs/operations/runbook.md, "A release retired by a contract step"';
        END IF;
        IF speaks = 0 THEN
            INSERT INTO release_sightings (writer_schema, last_commit_at) VALUES (0, now())
            ON CONFLICT (writer_schema) DO UPDATE SET last_commit_at = excluded.last_commit_at
            WHERE release_sightings.last_commit_at < excluded.last_commit_at - interval '1 second';
        END IF;
    END IF;
    -- The counter may be held by a writer of an older binary for a whole
    -- transaction: wait for it as that writer would have, within the
    -- statement's bound (COMMIT is a statement), not the cursor's shorter
    -- lock wait.
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    FOR head IN DELETE FROM ledger_commits WHERE xact = me RETURNING head_chain_id, head_block, head_hash, events LOOP
        staged := staged OR head.events IS NOT FALSE;
        IF head.head_chain_id IS NOT NULL THEN
            INSERT INTO chain_heads (chain_id, block_number, block_hash)
            VALUES (head.head_chain_id, head.head_block, head.head_hash)
            ON CONFLICT (chain_id) DO UPDATE SET block_number = excluded.block_number,
                block_hash = excluded.block_hash, updated_at = now();
        END IF;
    END LOOP;
    IF NOT staged THEN
        RETURN NULL;
    END IF;
    SELECT last_seq INTO last FROM payment_event_seq FOR UPDATE;
    SELECT history_hash INTO prior FROM payment_events WHERE seq = last;
    -- Holding the counter, this transaction alone numbers events. Each
    -- staged event takes its seq in the order it was staged. In the common
    -- case every staged id is new (none recorded, none staged twice): one
    -- plain insert moves them all. A recorded or repeated id makes it fail
    -- on the unique index on event_id; its subtransaction then undoes it
    -- (the staged rows are back), the later occurrences are named, and the
    -- insert runs again. The counter row, locked above, is written after
    -- the block, by this transaction itself: written inside the
    -- subtransaction, its lock would be kept as a MultiXact at every commit.
    BEGIN
        moved := burnpoller_move_staged(me, last, prior);
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        IF violated IS DISTINCT FROM 'payment_events_event_id_key' THEN
            RAISE;
        END IF;
        moved := NULL;
    END;
    IF moved IS NULL THEN
        -- Some id repeats. A staged id recorded already, or staged earlier
        -- by this transaction, names a later occurrence of that step: in
        -- staging order, it takes the first free :<n>, n from 2 (free in
        -- payment_events and among the transaction's staged ids). The event
        -- is staged again under it (delete and insert: writers may not
        -- update the staged rows), keeping its place.
        FOR again IN
            SELECT s.row, s.event_id FROM (
                SELECT ctid AS row, event_id, ord, row_number() OVER (PARTITION BY event_id ORDER BY ord) AS rank
                FROM payment_events_staged WHERE xact = me) s
            WHERE s.rank > 1 OR EXISTS (SELECT 1 FROM payment_events e WHERE e.event_id = s.event_id)
            ORDER BY s.ord
        LOOP
            nth := 2;
            LOOP
                candidate := again.event_id || ':' || nth;
                EXIT WHEN NOT EXISTS (SELECT 1 FROM payment_events WHERE event_id = candidate)
                      AND NOT EXISTS (SELECT 1 FROM payment_events_staged WHERE xact = me AND event_id = candidate);
                nth := nth + 1;
            END LOOP;
            WITH d AS (
                DELETE FROM payment_events_staged WHERE ctid = again.row RETURNING *
            )
            INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                               block_hash, payer, digest, amount, burned_at, payment_id, reason)
            SELECT d.ord, candidate, d.kind, d.chain_id, d.contract, d.tx_hash, d.log_index, d.block_number,
                   d.block_hash, d.payer, d.digest, d.amount, d.burned_at, d.payment_id, d.reason
            FROM d;
        END LOOP;
        moved := burnpoller_move_staged(me, last, prior);
    END IF;
    IF moved > 0 THEN
        UPDATE payment_event_seq SET last_seq = last + moved;
        PERFORM pg_notify('burnpoller_events', '{"seq":' || (last + moved) || '}');
    END IF;
    RETURN NULL;
END $$;

COMMENT ON FUNCTION burnpoller_commit_ledger() IS 'Inside COMMIT: refuses a retired release''s commit, notes an older release''s, finds the transaction''s own staged rows (xact), names each staged event''s occurrence, numbers them after payment_event_seq, moves them into payment_events with their history_hash, records its chain head, notifies burnpoller_events.';

---- create above / drop below ----

SET LOCAL lock_timeout = '500ms';

CREATE OR REPLACE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql
-- Compiling the statements below costs more than running them. The staged
-- tables' statistics say little (their rows live for one transaction, their
-- dead rows until vacuum): the transaction's own rows are found by the index
-- on xact, never by reading the tables whole.
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    me        xid8 := pg_current_xact_id();
    head      record;
    again     record;
    staged    boolean := false;
    last      bigint;
    prior     bytea;
    moved     bigint;
    nth       integer;
    candidate text;
    violated  text;
BEGIN
    -- The counter may be held by a writer of an older binary for a whole
    -- transaction: wait for it as that writer would have, within the
    -- statement's bound (COMMIT is a statement), not the cursor's shorter
    -- lock wait.
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    FOR head IN DELETE FROM ledger_commits WHERE xact = me RETURNING head_chain_id, head_block, head_hash, events LOOP
        staged := staged OR head.events IS NOT FALSE;
        IF head.head_chain_id IS NOT NULL THEN
            INSERT INTO chain_heads (chain_id, block_number, block_hash)
            VALUES (head.head_chain_id, head.head_block, head.head_hash)
            ON CONFLICT (chain_id) DO UPDATE SET block_number = excluded.block_number,
                block_hash = excluded.block_hash, updated_at = now();
        END IF;
    END LOOP;
    IF NOT staged THEN
        RETURN NULL;
    END IF;
    SELECT last_seq INTO last FROM payment_event_seq FOR UPDATE;
    SELECT history_hash INTO prior FROM payment_events WHERE seq = last;
    -- Holding the counter, this transaction alone numbers events. Each
    -- staged event takes its seq in the order it was staged. In the common
    -- case every staged id is new (none recorded, none staged twice): one
    -- plain insert moves them all. A recorded or repeated id makes it fail
    -- on the unique index on event_id; its subtransaction then undoes it
    -- (the staged rows are back), the later occurrences are named, and the
    -- insert runs again. The counter row, locked above, is written after
    -- the block, by this transaction itself: written inside the
    -- subtransaction, its lock would be kept as a MultiXact at every commit.
    BEGIN
        moved := burnpoller_move_staged(me, last, prior);
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        IF violated IS DISTINCT FROM 'payment_events_event_id_key' THEN
            RAISE;
        END IF;
        moved := NULL;
    END;
    IF moved IS NULL THEN
        -- Some id repeats. A staged id recorded already, or staged earlier
        -- by this transaction, names a later occurrence of that step: in
        -- staging order, it takes the first free :<n>, n from 2 (free in
        -- payment_events and among the transaction's staged ids). The event
        -- is staged again under it (delete and insert: writers may not
        -- update the staged rows), keeping its place.
        FOR again IN
            SELECT s.row, s.event_id FROM (
                SELECT ctid AS row, event_id, ord, row_number() OVER (PARTITION BY event_id ORDER BY ord) AS rank
                FROM payment_events_staged WHERE xact = me) s
            WHERE s.rank > 1 OR EXISTS (SELECT 1 FROM payment_events e WHERE e.event_id = s.event_id)
            ORDER BY s.ord
        LOOP
            nth := 2;
            LOOP
                candidate := again.event_id || ':' || nth;
                EXIT WHEN NOT EXISTS (SELECT 1 FROM payment_events WHERE event_id = candidate)
                      AND NOT EXISTS (SELECT 1 FROM payment_events_staged WHERE xact = me AND event_id = candidate);
                nth := nth + 1;
            END LOOP;
            WITH d AS (
                DELETE FROM payment_events_staged WHERE ctid = again.row RETURNING *
            )
            INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                               block_hash, payer, digest, amount, burned_at, payment_id, reason)
            SELECT d.ord, candidate, d.kind, d.chain_id, d.contract, d.tx_hash, d.log_index, d.block_number,
                   d.block_hash, d.payer, d.digest, d.amount, d.burned_at, d.payment_id, d.reason
            FROM d;
        END LOOP;
        moved := burnpoller_move_staged(me, last, prior);
    END IF;
    IF moved > 0 THEN
        UPDATE payment_event_seq SET last_seq = last + moved;
        PERFORM pg_notify('burnpoller_events', '{"seq":' || (last + moved) || '}');
    END IF;
    RETURN NULL;
END $$;

COMMENT ON FUNCTION burnpoller_commit_ledger() IS 'Inside COMMIT: finds the transaction''s own staged rows (xact), names each staged event''s occurrence, numbers them after payment_event_seq, moves them into payment_events with their history_hash, records its chain head, notifies burnpoller_events.';

DROP TABLE release_sightings;
DROP TABLE schema_contracts;
ALTER TABLE replica_members DROP COLUMN release, DROP COLUMN schema_version;
