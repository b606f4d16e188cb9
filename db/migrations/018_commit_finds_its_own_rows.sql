---- tern: disable-tx ----
-- Two changes to the COMMIT-time numbering of events (migration 10).
--
-- 1. A commit finds its own staged rows by its own transaction id. The
--    staged tables keep the rows other transactions deleted while any
--    snapshot older than them is open (another group's frozen writer, a slow
--    consumer, a pg_dump), and the numbering read both tables whole: after
--    another group recorded 150 ranges of 2,000 events beside a frozen
--    writer, a one-event commit held the event counter for a median of
--    53.6 ms, against 3.2 ms after a vacuum. Each staged row and each
--    ledger_commits row now carries the id of the transaction that wrote it
--    (xact, filled by its default, so that writers of the previous release
--    fill it too), and the commit reads the rows of its own id through an
--    index: the pages it touches no longer grow with others' dead rows.
--
-- 2. Every event carries history_hash, the hash of the event log up to the
--    end of the commit that numbered it: sha256 of the history_hash of the
--    event just before that commit's first (nothing when that event has none:
--    the first commit, or one numbered before this migration) followed by the
--    event_ids the commit numbered, in seq order, each followed by a newline.
--    Every event a commit numbers carries the same value. An event whose
--    history_hash is what a reader saw there earlier has below it exactly the
--    events the reader saw then, whatever happened in between (an
--    asynchronous failover that lost the tail, then numbered other events,
--    and some of the same ones, at the lost seqs): a follower checks one row
--    and knows whether any event it handed over has moved.
--
-- Built for a live ledger, statement by statement, each able to run again
-- after a failure half-way. The staged tables are unlogged and always empty
-- to other sessions: their rewrite for the column default takes their lock
-- for a moment, waiting at most 10 s for it (else the migration fails and is
-- run again). history_hash is added with no default, which changes only the
-- catalog, and its check NOT VALID, then validated under a lock that lets
-- writers and readers go on. The new numbering replaces the old one last:
-- a writer that staged before it commits after it, its rows already
-- carrying xact.

SET lock_timeout = '10s';
ALTER TABLE payment_events_staged ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS payment_events_staged_xact_idx ON payment_events_staged (xact);
ALTER TABLE ledger_commits ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS ledger_commits_xact_idx ON ledger_commits (xact);
ALTER TABLE payment_events ADD COLUMN IF NOT EXISTS history_hash bytea;
ALTER TABLE payment_events
    DROP CONSTRAINT IF EXISTS payment_events_history_hash_check,
    ADD CONSTRAINT payment_events_history_hash_check CHECK (octet_length(history_hash) = 32) NOT VALID;
RESET lock_timeout;
ALTER TABLE payment_events VALIDATE CONSTRAINT payment_events_history_hash_check;

COMMENT ON COLUMN payment_events.history_hash IS 'sha256 of the history_hash before this event''s commit (none: empty) and the event_ids it numbered, each with a newline: equal where a reader saw it means the same events below.';

-- Moves the calling transaction's staged events (xact = me) into
-- payment_events, numbered after last in staging order, each with the
-- history_hash of the commit, and returns how many it moved. Every staged
-- id must be new: a recorded or repeated one fails on the unique index on
-- event_id.
CREATE OR REPLACE FUNCTION burnpoller_move_staged(me xid8, last bigint, prior bytea) RETURNS bigint
LANGUAGE sql
SET enable_seqscan = off
AS $$
    WITH staged AS (
        DELETE FROM payment_events_staged WHERE xact = me RETURNING *
    ), numbered AS (
        SELECT last + row_number() OVER (ORDER BY s.ord) AS seq, s.* FROM staged s
    ), history AS (
        SELECT sha256(coalesce(prior, ''::bytea)
                      || convert_to(string_agg(n.event_id || E'\n', '' ORDER BY n.seq), 'UTF8')) AS hash
        FROM numbered n
    ), ins AS (
        INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                    block_hash, payer, digest, amount, burned_at, payment_id, reason, history_hash)
        SELECT n.seq, n.event_id, n.kind, n.chain_id, n.contract, n.tx_hash, n.log_index, n.block_number,
               n.block_hash, n.payer, n.digest, n.amount, n.burned_at, n.payment_id, n.reason,
               (SELECT hash FROM history)
        FROM numbered n
        RETURNING 1
    )
    SELECT count(*) FROM ins
$$;

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

---- create above / drop below ----

SET LOCAL lock_timeout = '10s';

CREATE OR REPLACE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql
SET jit = off
AS $$
DECLARE
    head      record;
    again     record;
    staged    boolean := false;
    last      bigint;
    moved     bigint;
    kept      bigint;
    nth       integer;
    candidate text;
    violated  text;
BEGIN
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    FOR head IN DELETE FROM ledger_commits RETURNING head_chain_id, head_block, head_hash, events LOOP
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
    BEGIN
        WITH staged AS (
            DELETE FROM payment_events_staged RETURNING *
        ), ins AS (
            INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                        block_hash, payer, digest, amount, burned_at, payment_id, reason)
            SELECT last + row_number() OVER (ORDER BY s.ord), s.event_id, s.kind, s.chain_id, s.contract, s.tx_hash,
                   s.log_index, s.block_number, s.block_hash, s.payer, s.digest, s.amount, s.burned_at, s.payment_id, s.reason
            FROM staged s
            RETURNING 1
        )
        SELECT count(*) INTO moved FROM ins;
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        IF violated IS DISTINCT FROM 'payment_events_event_id_key' THEN
            RAISE;
        END IF;
        moved := NULL;
    END;
    IF moved IS NULL THEN
        WITH staged AS (
            DELETE FROM payment_events_staged RETURNING *
        ), numbered AS (
            SELECT last + row_number() OVER (ORDER BY s.ord) AS seq,
                   row_number() OVER (PARTITION BY s.event_id ORDER BY s.ord) AS rank, s.*
            FROM staged s
        ), ins AS (
            INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                        block_hash, payer, digest, amount, burned_at, payment_id, reason)
            SELECT n.seq, n.event_id, n.kind, n.chain_id, n.contract, n.tx_hash, n.log_index, n.block_number,
                   n.block_hash, n.payer, n.digest, n.amount, n.burned_at, n.payment_id, n.reason
            FROM numbered n WHERE n.rank = 1
            ON CONFLICT (event_id) DO NOTHING
            RETURNING seq
        ), later AS (
            INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                               block_hash, payer, digest, amount, burned_at, payment_id, reason)
            SELECT n.seq, n.event_id, n.kind, n.chain_id, n.contract, n.tx_hash, n.log_index, n.block_number,
                   n.block_hash, n.payer, n.digest, n.amount, n.burned_at, n.payment_id, n.reason
            FROM numbered n WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.seq = n.seq)
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM numbered), (SELECT count(*) FROM later) INTO moved, kept;
        IF kept > 0 THEN
            FOR again IN SELECT ctid AS row, ord, event_id FROM payment_events_staged ORDER BY ord LOOP
                nth := 2;
                LOOP
                    candidate := again.event_id || ':' || nth;
                    EXIT WHEN NOT EXISTS (SELECT 1 FROM payment_events WHERE event_id = candidate);
                    nth := nth + 1;
                END LOOP;
                INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                            block_hash, payer, digest, amount, burned_at, payment_id, reason)
                SELECT s.ord, candidate, s.kind, s.chain_id, s.contract, s.tx_hash, s.log_index, s.block_number,
                       s.block_hash, s.payer, s.digest, s.amount, s.burned_at, s.payment_id, s.reason
                FROM payment_events_staged s WHERE s.ctid = again.row;
                DELETE FROM payment_events_staged WHERE ctid = again.row;
            END LOOP;
        END IF;
    END IF;
    IF moved > 0 THEN
        UPDATE payment_event_seq SET last_seq = last + moved;
        PERFORM pg_notify('burnpoller_events', '{"seq":' || (last + moved) || '}');
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION burnpoller_move_staged(xid8, bigint, bytea);
ALTER TABLE payment_events DROP COLUMN history_hash;
DROP INDEX ledger_commits_xact_idx;
ALTER TABLE ledger_commits DROP COLUMN xact;
DROP INDEX payment_events_staged_xact_idx;
ALTER TABLE payment_events_staged DROP COLUMN xact;
