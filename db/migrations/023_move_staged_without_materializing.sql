-- The move of a transaction's staged events into payment_events, inside its
-- COMMIT (migration 18's burnpoller_move_staged), without materializing
-- them. The function was one statement: the staged rows deleted with
-- RETURNING, numbered by a window over that, hashed, then inserted, and
-- Postgres kept each step's rows in a tuplestore (the numbered rows were
-- read twice, for the hash and for the insert), spilling to temporary files
-- past work_mem at about 10,000 events. It is now three statements over
-- the staged rows themselves, found by the index on xact: the history hash,
-- the numbered insert, the delete. The counter is held while COMMIT runs
-- them. Counted in instructions on ranges of 2,000 (make
-- bench-pg-instructions), an event staged and moved costs the server
-- 87,900 instead of 99,400.
--
-- Same seqs, same history_hash, same order: each staged event takes
-- last + its rank by ord (a transaction's ords are distinct, written by its
-- own writer in the order it staged), and the hash covers the event_ids in
-- that order. A recorded or repeated id still fails the insert on the
-- unique index on event_id before anything is deleted; the caller's
-- subtransaction undoes it, as before.

CREATE OR REPLACE FUNCTION burnpoller_move_staged(me xid8, last bigint, prior bytea) RETURNS bigint
LANGUAGE plpgsql
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    hash  bytea;
    moved bigint;
BEGIN
    SELECT sha256(coalesce(prior, ''::bytea)
                  || convert_to(string_agg(s.event_id || E'\n', '' ORDER BY s.ord), 'UTF8'))
    INTO hash
    FROM payment_events_staged s WHERE s.xact = me;
    INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
                                block_hash, payer, digest, amount, burned_at, payment_id, reason, history_hash)
    SELECT last + row_number() OVER (ORDER BY s.ord), s.event_id, s.kind, s.chain_id, s.contract, s.tx_hash,
           s.log_index, s.block_number, s.block_hash, s.payer, s.digest, s.amount, s.burned_at, s.payment_id,
           s.reason, hash
    FROM payment_events_staged s WHERE s.xact = me;
    GET DIAGNOSTICS moved = ROW_COUNT;
    DELETE FROM payment_events_staged WHERE xact = me;
    RETURN moved;
END $$;

COMMENT ON FUNCTION burnpoller_move_staged(xid8, bigint, bytea) IS 'Inside COMMIT: moves the transaction''s staged events (xact) into payment_events, numbered after last by ord, with the commit''s history_hash; returns how many.';

---- create above / drop below ----

-- Migration 18's function, as it was.
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

COMMENT ON FUNCTION burnpoller_move_staged(xid8, bigint, bytea) IS NULL;
