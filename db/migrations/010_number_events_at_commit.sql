-- Events are numbered inside COMMIT, not when they are written.
--
-- Until now a writer took the one row of payment_event_seq at its first
-- event and held it to its commit, round trips to the node and to the
-- client included: every group on the database waited for the slowest (or a
-- frozen) writer of any other group. Now a writer stages its events in
-- payment_events_staged and records, in ledger_commits, that it has some (and
-- the head its head tracking read). A deferred constraint trigger on
-- ledger_commits runs inside COMMIT: it takes the counter, numbers the
-- staged events after the last seq, moves them into payment_events, writes
-- the chain head and sends the {"seq":N} notification. The counter is held
-- only while the server commits, after the client has sent COMMIT: a client
-- that freezes, or loses its network, holds nothing another group needs.
-- The consumer contract is unchanged: seqs are gap-free and increase in
-- commit order (the next committer takes the counter only once this commit
-- is visible).
--
-- Both tables are UNLOGGED: their rows never outlive the transaction that
-- wrote them (the trigger deletes them before the commit ends), so a crash
-- loses nothing of them, and they cost no WAL. Other sessions never see a
-- row of them: each transaction reads and deletes its own.

-- An event id names one occurrence of a step: the first time a burn takes
-- a step (kind) at a position (block hash), its id is
-- <chain_id>:<tx_hash>:<log_index>:<kind>:<block_hash>, as before; the
-- n-th time (a burn seen again at a block the chain came back to, a
-- payment confirmed again after an orphaning), the same followed by :<n>.
-- n is counted inside COMMIT from what payment_events holds, so the same
-- occurrence recorded again after an asynchronous failover lost it (the
-- standby's log is a prefix of the lost one) gets the same id.

-- Why an event was recorded, when it is not the chain's doing (a retracted
-- of a contract the group stopped following); null otherwise. A nullable
-- column without a default changes only the catalog.
SET LOCAL lock_timeout = '10s';
ALTER TABLE payment_events ADD COLUMN reason text CHECK (length(reason) <= 200);

CREATE UNLOGGED TABLE payment_events_staged (
    -- The event's place among the transaction's events.
    ord          bigint        NOT NULL,
    event_id     text          NOT NULL,
    kind         text          NOT NULL,
    chain_id     bigint        NOT NULL,
    contract     text          NOT NULL,
    tx_hash      text          NOT NULL,
    log_index    integer       NOT NULL,
    block_number bigint        NOT NULL,
    block_hash   text          NOT NULL,
    payer        text          NOT NULL,
    digest       text          NOT NULL,
    amount       numeric(78,0) NOT NULL,
    burned_at    timestamptz   NOT NULL,
    payment_id   bigint,
    reason       text
);

COMMENT ON TABLE payment_events_staged IS 'Events written by a transaction and not numbered yet; moved into payment_events inside its COMMIT. Always empty to other sessions.';

-- One row per transaction that staged events or read a head.
CREATE UNLOGGED TABLE ledger_commits (
    head_chain_id bigint,
    head_block    bigint,
    head_hash     text
);

COMMENT ON TABLE ledger_commits IS 'One row per writing transaction, consumed inside its COMMIT by burnpoller_commit_ledger(). Always empty to other sessions.';

CREATE FUNCTION burnpoller_commit_ledger() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    head      record;
    again     record;
    last      bigint;
    moved     bigint;
    nth       integer;
    candidate text;
BEGIN
    -- The counter may be held by a writer of an older binary for a whole
    -- transaction: wait for it as that writer would have, within the
    -- statement's bound (COMMIT is a statement), not the cursor's shorter
    -- lock wait.
    PERFORM set_config('lock_timeout', current_setting('statement_timeout'), true);
    FOR head IN DELETE FROM ledger_commits RETURNING head_chain_id, head_block, head_hash LOOP
        IF head.head_chain_id IS NOT NULL THEN
            INSERT INTO chain_heads (chain_id, block_number, block_hash)
            VALUES (head.head_chain_id, head.head_block, head.head_hash)
            ON CONFLICT (chain_id) DO UPDATE SET block_number = excluded.block_number,
                block_hash = excluded.block_hash, updated_at = now();
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM payment_events_staged) THEN
        RETURN NULL;
    END IF;
    SELECT last_seq INTO last FROM payment_event_seq FOR UPDATE;
    -- Holding the counter, this transaction alone numbers events. A staged
    -- id already recorded, or staged earlier by this transaction, is a
    -- later occurrence of that step: it takes the first free :<n>, n from 2.
    FOR again IN
        SELECT s.row, s.event_id FROM (
            SELECT ctid AS row, event_id, ord, row_number() OVER (PARTITION BY event_id ORDER BY ord) AS rank
            FROM payment_events_staged) s
        WHERE s.rank > 1 OR EXISTS (SELECT 1 FROM payment_events e WHERE e.event_id = s.event_id)
        ORDER BY s.ord
    LOOP
        nth := 2;
        LOOP
            candidate := again.event_id || ':' || nth;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM payment_events WHERE event_id = candidate)
                  AND NOT EXISTS (SELECT 1 FROM payment_events_staged WHERE event_id = candidate);
            nth := nth + 1;
        END LOOP;
        UPDATE payment_events_staged SET event_id = candidate WHERE ctid = again.row;
    END LOOP;
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
    IF moved > 0 THEN
        UPDATE payment_event_seq SET last_seq = last + moved;
        PERFORM pg_notify('burnpoller_events', '{"seq":' || (last + moved) || '}');
    END IF;
    RETURN NULL;
END $$;

COMMENT ON FUNCTION burnpoller_commit_ledger() IS 'Inside COMMIT: names each staged event''s occurrence, numbers the transaction''s staged events after payment_event_seq, moves them into payment_events, records its chain head, notifies burnpoller_events.';

CREATE CONSTRAINT TRIGGER ledger_commits_at_commit
    AFTER INSERT ON ledger_commits
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION burnpoller_commit_ledger();

COMMENT ON TABLE payment_event_seq IS 'The last payment_events.seq given out; taken inside COMMIT (burnpoller_commit_ledger), which orders writers by commit.';

-- Writers delete their own staged rows (inside COMMIT, with their own
-- rights). Every role that may record payments gets that, as in migration
-- 6; db/roles.sql does the same when it runs after this migration.
DO $$
DECLARE
    writer name;
BEGIN
    FOR writer IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON payment_events_staged, ledger_commits TO %I', writer);
    END LOOP;
END $$;

---- create above / drop below ----

DROP TRIGGER ledger_commits_at_commit ON ledger_commits;
DROP FUNCTION burnpoller_commit_ledger();
DROP TABLE ledger_commits;
DROP TABLE payment_events_staged;
ALTER TABLE payment_events DROP COLUMN reason;
COMMENT ON TABLE payment_event_seq IS 'The last payment_events.seq given out; its row lock orders writers by commit.';
