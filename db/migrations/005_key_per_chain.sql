---- tern: disable-tx ----
-- The ledger's unique key becomes (chain_id, tx_hash, log_index): rows carry
-- their chain, and several chains may share one ledger. The block index
-- becomes (chain_id, block_number): every writer reads the rows of a chain's
-- block range before recording it, and an index on the block alone lets the
-- planner prefer scanning every row of the chain while statistics are young. Built without
-- blocking writers on a populated table (CREATE INDEX CONCURRENTLY, outside a
-- transaction), then swapped in by one ALTER TABLE, which is atomic. Every
-- step can run again after a failure half-way: a leftover index of an
-- interrupted build is dropped first, and the swap drops whichever of the
-- old and new constraints exists.

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (chain_id, tx_hash, log_index);
ALTER TABLE payments
    DROP CONSTRAINT IF EXISTS payments_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS payments_chain_id_tx_hash_log_index_key,
    ADD CONSTRAINT payments_chain_id_tx_hash_log_index_key UNIQUE USING INDEX payments_key_building;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (chain_id, tx_hash, log_index);
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_chain_id_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;

DROP INDEX CONCURRENTLY IF EXISTS payments_chain_id_block_number_idx;
CREATE INDEX CONCURRENTLY payments_chain_id_block_number_idx ON payments (chain_id, block_number);
DROP INDEX CONCURRENTLY IF EXISTS payments_block_number_idx;

---- create above / drop below ----
---- tern: disable-tx ----

DROP INDEX CONCURRENTLY IF EXISTS payments_key_building;
CREATE UNIQUE INDEX CONCURRENTLY payments_key_building ON payments (tx_hash, log_index);
ALTER TABLE payments
    DROP CONSTRAINT IF EXISTS payments_chain_id_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS payments_tx_hash_log_index_key,
    ADD CONSTRAINT payments_tx_hash_log_index_key UNIQUE USING INDEX payments_key_building;

DROP INDEX CONCURRENTLY IF EXISTS rejected_logs_key_building;
CREATE UNIQUE INDEX CONCURRENTLY rejected_logs_key_building ON rejected_logs (tx_hash, log_index);
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_chain_id_tx_hash_log_index_key,
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_log_index_key,
    ADD CONSTRAINT rejected_logs_tx_hash_log_index_key UNIQUE USING INDEX rejected_logs_key_building;

DROP INDEX CONCURRENTLY IF EXISTS payments_block_number_idx;
CREATE INDEX CONCURRENTLY payments_block_number_idx ON payments (block_number);
DROP INDEX CONCURRENTLY IF EXISTS payments_chain_id_block_number_idx;
