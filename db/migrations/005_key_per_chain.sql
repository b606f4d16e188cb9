---- tern: disable-tx ----
-- The ledger's unique key becomes (chain_id, tx_hash, log_index), over the
-- payments not marked orphaned: rows carry their chain, several chains may
-- share one ledger, and a burn re-included under its old key after a reset
-- marked its first row orphaned is a payment of its own. The block index
-- becomes (chain_id, block_number): every writer reads the rows of a chain's
-- block range before recording it, and an index on the block alone lets the
-- planner prefer reading every row of the chain while statistics are young.
-- For the same reason the key's index leads with tx_hash: a lookup by
-- transaction cannot be answered by reading every row of a chain.
--
-- Built without blocking writers on a populated table: the indexes with
-- CREATE INDEX CONCURRENTLY (outside a transaction), then the old
-- constraints dropped, each by one statement, which waits at most 10 s for
-- its lock (a long reader would otherwise queue every writer behind it; the
-- migration then fails and is run again). Every step can run again after a
-- failure half-way: a leftover index of an interrupted build is dropped
-- first, and the final names are taken over by the new build.

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (tx_hash, log_index, chain_id) WHERE orphaned_at IS NULL;
SET lock_timeout = '10s';
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_tx_hash_log_index_key;
RESET lock_timeout;
DROP INDEX CONCURRENTLY IF EXISTS payments_live_key;
SET lock_timeout = '10s';
ALTER INDEX payments_key_building RENAME TO payments_live_key;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (chain_id, tx_hash, log_index);
SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_chain_id_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS payments_chain_id_block_number_idx;
CREATE INDEX CONCURRENTLY payments_chain_id_block_number_idx ON payments (chain_id, block_number);
DROP INDEX CONCURRENTLY IF EXISTS payments_block_number_idx;

---- create above / drop below ----
---- tern: disable-tx ----
-- Back to UNIQUE (tx_hash, log_index): fails if orphaned rows or several
-- chains share a key, which the old schema cannot hold.

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (tx_hash, log_index);
SET lock_timeout = '10s';
ALTER TABLE payments
    DROP CONSTRAINT IF EXISTS payments_tx_hash_log_index_key,
    ADD CONSTRAINT payments_tx_hash_log_index_key UNIQUE USING INDEX payments_key_building;
RESET lock_timeout;
DROP INDEX CONCURRENTLY IF EXISTS payments_live_key;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (tx_hash, log_index);
SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;
RESET lock_timeout;

DROP INDEX CONCURRENTLY IF EXISTS payments_block_number_idx;
CREATE INDEX CONCURRENTLY payments_block_number_idx ON payments (block_number);
DROP INDEX CONCURRENTLY IF EXISTS payments_chain_id_block_number_idx;
