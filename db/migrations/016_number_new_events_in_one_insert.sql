-- The COMMIT-time numbering of events, cheaper in the common case. A
-- transaction's staged events almost always carry ids that are new (a
-- burn's step recorded for the first time): they go into payment_events in
-- one plain insert, numbered in staging order. Migration 15's general
-- numbering (an arbiter probe of the unique index for every event, a
-- ranking of the ids staged twice, the passed-over events staged again)
-- runs only when that insert meets an id already recorded or staged twice,
-- after the insert is undone. Same ids, same seqs, same order as before.
-- At 2,000 events a commit the numbering took 55-60 ms and now takes 37-40.

SET LOCAL lock_timeout = '10s';

CREATE OR REPLACE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql
-- Compiling the statements below costs more than running them.
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
    -- The counter may be held by a writer of an older binary for a whole
    -- transaction: wait for it as that writer would have, within the
    -- statement's bound (COMMIT is a statement), not the cursor's shorter
    -- lock wait.
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    -- The staged table is read only when a row says events were staged:
    -- reading it costs a scan of the rows other transactions deleted, until
    -- vacuum comes by.
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
    -- Holding the counter, this transaction alone numbers events. Each
    -- staged event takes its seq in the order it was staged. In the common
    -- case every staged id is new (none recorded, none staged twice): one
    -- plain insert moves them all, with no arbiter probe and no ranking. A
    -- recorded or repeated id makes it fail on the unique index on event_id;
    -- its subtransaction then undoes it (the staged rows are back) and the
    -- general numbering below runs. Both give the same seqs when no id
    -- repeats. The counter row, locked above, is written after the block,
    -- by this transaction itself: written inside the subtransaction, its
    -- lock would be kept as a MultiXact at every commit.
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
        -- Some id repeats. Each staged event goes into payment_events under
        -- its id, unless that id is recorded already, or was staged earlier
        -- by this transaction (a later occurrence of that step): the unique
        -- index on event_id says so as it inserts, and the event stays
        -- staged, its seq in ord.
        WITH staged AS (
            DELETE FROM payment_events_staged RETURNING *
        ), numbered AS (
            SELECT last + row_number() OVER (ORDER BY s.ord) AS seq,
                   row_number() OVER (PARTITION BY s.event_id ORDER BY s.ord) AS rank, s.*
            FROM staged s
        ), ins AS (
            -- Of one id staged twice, the first staged takes it.
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
        -- A later occurrence takes the first free :<n>, n from 2, in seq order.
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

---- create above / drop below ----

SET LOCAL lock_timeout = '10s';

CREATE OR REPLACE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql
-- Compiling the statements below costs more than running them.
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
BEGIN
    -- The counter may be held by a writer of an older binary for a whole
    -- transaction: wait for it as that writer would have, within the
    -- statement's bound (COMMIT is a statement), not the cursor's shorter
    -- lock wait.
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    -- The staged table is read only when a row says events were staged:
    -- reading it costs a scan of the rows other transactions deleted, until
    -- vacuum comes by.
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
    -- Holding the counter, this transaction alone numbers events. Each
    -- staged event takes its seq in the order it was staged and goes into
    -- payment_events under its id, unless that id is recorded already, or
    -- was staged earlier by this transaction (a later occurrence of that
    -- step): the unique index on event_id says so as it inserts, and the
    -- event stays staged, its seq in ord.
    WITH staged AS (
        DELETE FROM payment_events_staged RETURNING *
    ), numbered AS (
        SELECT last + row_number() OVER (ORDER BY s.ord) AS seq,
               row_number() OVER (PARTITION BY s.event_id ORDER BY s.ord) AS rank, s.*
        FROM staged s
    ), ins AS (
        -- Of one id staged twice, the first staged takes it.
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
    -- A later occurrence takes the first free :<n>, n from 2, in seq order.
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
    IF moved > 0 THEN
        UPDATE payment_event_seq SET last_seq = last + moved;
        PERFORM pg_notify('burnpoller_events', '{"seq":' || (last + moved) || '}');
    END IF;
    RETURN NULL;
END $$;

