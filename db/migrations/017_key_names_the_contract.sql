---- tern: disable-tx ----
-- A burn's key names its contract: (chain_id, contract, tx_hash, log_index)
-- for payments (over the rows not orphaned), pending_payments and
-- rejected_logs. A log's index is its place in its block, not in its
-- transaction: a transaction that burns on two contracts and is re-included
-- in another block (a reorganisation above finality does this to pending
-- rows routinely) can carry one contract's burn at log 7 in one block and
-- the other's at log 7 in the other. Keyed without the contract, the second
-- group's insert waited on the first group's uncommitted row, was then
-- skipped as a duplicate while its cursor moved past it (a payment lost),
-- and its pending range deleted the other group's row. With the contract in
-- the key, one group's rows never match, block or delete another's.
--
-- Built as migration 5 was, without blocking writers on a populated
-- ledger: each new unique index with CREATE INDEX CONCURRENTLY (outside a
-- transaction), then the old key dropped by one statement that waits at
-- most 10 s for its lock (the migration then fails and is run again). Every
-- step can run again after a failure half-way: a leftover index of an
-- interrupted build is dropped first. The new keys are wider than the old
-- ones, so they build on every ledger the old ones held.
--
-- Replicas of the previous release, still running while it applies, keep
-- working until the old key is dropped; after that their inserts name a key
-- that no longer exists (ON CONFLICT on the old columns) and fail, so their
-- transactions roll back and they retry until they are replaced: nothing is
-- lost or recorded twice. The new binary's inserts find the new index as
-- soon as it is built, under either name.

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (tx_hash, log_index, chain_id, contract) WHERE orphaned_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS payments_live_key;
SET lock_timeout = '10s';
ALTER INDEX payments_key_building RENAME TO payments_live_key;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS pending_payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY pending_payments_key_building ON pending_payments (tx_hash, log_index, chain_id, contract);
SET lock_timeout = '10s';
ALTER TABLE pending_payments
    DROP CONSTRAINT IF EXISTS pending_payments_pkey,
    ADD CONSTRAINT pending_payments_pkey PRIMARY KEY USING INDEX pending_payments_key_building;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (chain_id, contract, tx_hash, log_index);
SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_contract_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_chain_id_contract_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;
RESET lock_timeout;

-- The state of each burn, matched on the whole key.
SET lock_timeout = '10s';
CREATE OR REPLACE VIEW payment_status AS
SELECT p.chain_id, p.contract, p.tx_hash, p.log_index, p.block_number, p.block_hash,
       p.payer, p.digest, p.amount, p.burned_at,
       'confirmed'::text AS status, p.id AS payment_id,
       CASE WHEN h.block_number >= p.block_number THEN h.block_number - p.block_number + 1 END AS confirmations
FROM payments p
LEFT JOIN chain_heads h ON h.chain_id = p.chain_id
WHERE p.orphaned_at IS NULL
UNION ALL
SELECT pp.chain_id, pp.contract, pp.tx_hash, pp.log_index, pp.block_number, pp.block_hash,
       pp.payer, pp.digest, pp.amount, pp.burned_at,
       'seen'::text, NULL::bigint,
       CASE WHEN h.block_number >= pp.block_number THEN h.block_number - pp.block_number + 1 ELSE 0 END
FROM pending_payments pp
LEFT JOIN chain_heads h ON h.chain_id = pp.chain_id
WHERE NOT EXISTS (SELECT 1 FROM payments p
                  WHERE p.tx_hash = pp.tx_hash AND p.log_index = pp.log_index
                    AND p.chain_id = pp.chain_id AND p.contract = pp.contract AND p.orphaned_at IS NULL)
UNION ALL
SELECT * FROM (
    SELECT DISTINCT ON (e.tx_hash, e.log_index, e.chain_id, e.contract, e.digest)
           e.chain_id, e.contract, e.tx_hash, e.log_index, e.block_number, e.block_hash,
           e.payer, e.digest, e.amount, e.burned_at,
           'retracted'::text, NULL::bigint, NULL::bigint
    FROM payment_events e
    WHERE e.kind = 'retracted'
      AND NOT EXISTS (SELECT 1 FROM payments p
                      WHERE p.tx_hash = e.tx_hash AND p.log_index = e.log_index
                        AND p.chain_id = e.chain_id AND p.contract = e.contract AND p.orphaned_at IS NULL)
      AND NOT EXISTS (SELECT 1 FROM pending_payments pp
                      WHERE pp.tx_hash = e.tx_hash AND pp.log_index = e.log_index AND pp.chain_id = e.chain_id
                        AND pp.contract = e.contract)
    ORDER BY e.tx_hash, e.log_index, e.chain_id, e.contract, e.digest, e.seq DESC
) retracted;
RESET lock_timeout;

---- create above / drop below ----
---- tern: disable-tx ----
-- Back to the keys without the contract: fails if two contracts' rows share
-- one, which the old schema cannot hold.

SET lock_timeout = '10s';
CREATE OR REPLACE VIEW payment_status AS
SELECT p.chain_id, p.contract, p.tx_hash, p.log_index, p.block_number, p.block_hash,
       p.payer, p.digest, p.amount, p.burned_at,
       'confirmed'::text AS status, p.id AS payment_id,
       CASE WHEN h.block_number >= p.block_number THEN h.block_number - p.block_number + 1 END AS confirmations
FROM payments p
LEFT JOIN chain_heads h ON h.chain_id = p.chain_id
WHERE p.orphaned_at IS NULL
UNION ALL
SELECT pp.chain_id, pp.contract, pp.tx_hash, pp.log_index, pp.block_number, pp.block_hash,
       pp.payer, pp.digest, pp.amount, pp.burned_at,
       'seen'::text, NULL::bigint,
       CASE WHEN h.block_number >= pp.block_number THEN h.block_number - pp.block_number + 1 ELSE 0 END
FROM pending_payments pp
LEFT JOIN chain_heads h ON h.chain_id = pp.chain_id
WHERE NOT EXISTS (SELECT 1 FROM payments p
                  WHERE p.tx_hash = pp.tx_hash AND p.log_index = pp.log_index
                    AND p.chain_id = pp.chain_id AND p.orphaned_at IS NULL)
UNION ALL
SELECT * FROM (
    SELECT DISTINCT ON (e.tx_hash, e.log_index, e.chain_id, e.digest)
           e.chain_id, e.contract, e.tx_hash, e.log_index, e.block_number, e.block_hash,
           e.payer, e.digest, e.amount, e.burned_at,
           'retracted'::text, NULL::bigint, NULL::bigint
    FROM payment_events e
    WHERE e.kind = 'retracted'
      AND NOT EXISTS (SELECT 1 FROM payments p
                      WHERE p.tx_hash = e.tx_hash AND p.log_index = e.log_index
                        AND p.chain_id = e.chain_id AND p.orphaned_at IS NULL)
      AND NOT EXISTS (SELECT 1 FROM pending_payments pp
                      WHERE pp.tx_hash = e.tx_hash AND pp.log_index = e.log_index AND pp.chain_id = e.chain_id)
    ORDER BY e.tx_hash, e.log_index, e.chain_id, e.digest, e.seq DESC
) retracted;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (chain_id, tx_hash, log_index);
SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_contract_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_chain_id_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS pending_payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY pending_payments_key_building ON pending_payments (tx_hash, log_index, chain_id);
SET lock_timeout = '10s';
ALTER TABLE pending_payments
    DROP CONSTRAINT IF EXISTS pending_payments_pkey,
    ADD CONSTRAINT pending_payments_pkey PRIMARY KEY USING INDEX pending_payments_key_building;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (tx_hash, log_index, chain_id) WHERE orphaned_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS payments_live_key;
SET lock_timeout = '10s';
ALTER INDEX payments_key_building RENAME TO payments_live_key;
RESET lock_timeout;
