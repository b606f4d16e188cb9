---- tern: disable-tx ----
-- The checks on hex columns (hashes, addresses, digests) say the same thing
-- more cheaply. A bounded repetition such as '^0x[0-9a-f]{64}$' costs
-- Postgres' regular-expression engine about 13 µs a value, five of them a
-- payment row, more than the rest of the row's insert; a length test and an
-- unbounded class ('^0x[0-9a-f]*$') accept exactly the same values for about
-- 1.5 µs. The constraints keep their names.
--
-- Built without blocking writers on a populated table: each table's old
-- checks are replaced by one statement that adds the new ones NOT VALID
-- (no scan; it waits at most 10 s for its lock, else the migration fails and
-- is run again), then each is validated, which reads the table under a lock
-- that lets writes go on. Every value already passed the stricter old check,
-- so validation cannot fail on rows the old schema accepted. Every step can
-- run again after a failure half-way.

SET lock_timeout = '10s';
ALTER TABLE block_cursors
    DROP CONSTRAINT IF EXISTS block_cursors_last_processed_hash_check,
    ADD CONSTRAINT block_cursors_last_processed_hash_check CHECK (octet_length(last_processed_hash) = 66 AND last_processed_hash ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE block_cursors VALIDATE CONSTRAINT block_cursors_last_processed_hash_check;

SET lock_timeout = '10s';
ALTER TABLE payments
    DROP CONSTRAINT IF EXISTS payments_block_hash_check,
    ADD CONSTRAINT payments_block_hash_check CHECK (octet_length(block_hash) = 66 AND block_hash ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_contract_check,
    ADD CONSTRAINT payments_contract_check CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_digest_check,
    ADD CONSTRAINT payments_digest_check CHECK (octet_length(digest) = 66 AND digest ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_payer_check,
    ADD CONSTRAINT payments_payer_check CHECK (octet_length(payer) = 42 AND payer ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_tx_hash_check,
    ADD CONSTRAINT payments_tx_hash_check CHECK (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE payments VALIDATE CONSTRAINT payments_block_hash_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_contract_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_digest_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_payer_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_block_hash_check,
    ADD CONSTRAINT rejected_logs_block_hash_check CHECK (octet_length(block_hash) = 66 AND block_hash ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS rejected_logs_contract_check,
    ADD CONSTRAINT rejected_logs_contract_check CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_check,
    ADD CONSTRAINT rejected_logs_tx_hash_check CHECK (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_block_hash_check;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_contract_check;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE ledger_hooks
    DROP CONSTRAINT IF EXISTS ledger_hooks_contract_check,
    ADD CONSTRAINT ledger_hooks_contract_check CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS ledger_hooks_hook_sha256_check,
    ADD CONSTRAINT ledger_hooks_hook_sha256_check CHECK (hook_sha256 = '' OR (octet_length(hook_sha256) = 64 AND hook_sha256 ~ '^[0-9a-f]*$')) NOT VALID;
RESET lock_timeout;
ALTER TABLE ledger_hooks VALIDATE CONSTRAINT ledger_hooks_contract_check;
ALTER TABLE ledger_hooks VALIDATE CONSTRAINT ledger_hooks_hook_sha256_check;

SET lock_timeout = '10s';
ALTER TABLE pending_payments
    DROP CONSTRAINT IF EXISTS pending_payments_block_hash_check,
    ADD CONSTRAINT pending_payments_block_hash_check CHECK (octet_length(block_hash) = 66 AND block_hash ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_contract_check,
    ADD CONSTRAINT pending_payments_contract_check CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_digest_check,
    ADD CONSTRAINT pending_payments_digest_check CHECK (octet_length(digest) = 66 AND digest ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_payer_check,
    ADD CONSTRAINT pending_payments_payer_check CHECK (octet_length(payer) = 42 AND payer ~ '^0x[0-9a-f]*$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_tx_hash_check,
    ADD CONSTRAINT pending_payments_tx_hash_check CHECK (octet_length(tx_hash) = 66 AND tx_hash ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_block_hash_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_contract_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_digest_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_payer_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE chain_heads
    DROP CONSTRAINT IF EXISTS chain_heads_block_hash_check,
    ADD CONSTRAINT chain_heads_block_hash_check CHECK (octet_length(block_hash) = 66 AND block_hash ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE chain_heads VALIDATE CONSTRAINT chain_heads_block_hash_check;

SET lock_timeout = '10s';
ALTER TABLE group_contracts
    DROP CONSTRAINT IF EXISTS group_contracts_contract_check,
    ADD CONSTRAINT group_contracts_contract_check CHECK (octet_length(contract) = 42 AND contract ~ '^0x[0-9a-f]*$') NOT VALID;
RESET lock_timeout;
ALTER TABLE group_contracts VALIDATE CONSTRAINT group_contracts_contract_check;

SET lock_timeout = '10s';
ALTER TABLE head_scans
    DROP CONSTRAINT IF EXISTS head_scans_block_hash_check,
    ADD CONSTRAINT head_scans_block_hash_check CHECK (block_hash = '' OR (octet_length(block_hash) = 66 AND block_hash ~ '^0x[0-9a-f]*$')) NOT VALID;
RESET lock_timeout;
ALTER TABLE head_scans VALIDATE CONSTRAINT head_scans_block_hash_check;
---- create above / drop below ----
---- tern: disable-tx ----
-- The old checks back, built the same way.

SET lock_timeout = '10s';
ALTER TABLE block_cursors
    DROP CONSTRAINT IF EXISTS block_cursors_last_processed_hash_check,
    ADD CONSTRAINT block_cursors_last_processed_hash_check CHECK (last_processed_hash ~ '^0x[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE block_cursors VALIDATE CONSTRAINT block_cursors_last_processed_hash_check;

SET lock_timeout = '10s';
ALTER TABLE payments
    DROP CONSTRAINT IF EXISTS payments_block_hash_check,
    ADD CONSTRAINT payments_block_hash_check CHECK (block_hash ~ '^0x[0-9a-f]{64}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_contract_check,
    ADD CONSTRAINT payments_contract_check CHECK (contract ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_digest_check,
    ADD CONSTRAINT payments_digest_check CHECK (digest ~ '^0x[0-9a-f]{64}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_payer_check,
    ADD CONSTRAINT payments_payer_check CHECK (payer ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS payments_tx_hash_check,
    ADD CONSTRAINT payments_tx_hash_check CHECK (tx_hash ~ '^0x[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE payments VALIDATE CONSTRAINT payments_block_hash_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_contract_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_digest_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_payer_check;
ALTER TABLE payments VALIDATE CONSTRAINT payments_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE rejected_logs
    DROP CONSTRAINT IF EXISTS rejected_logs_block_hash_check,
    ADD CONSTRAINT rejected_logs_block_hash_check CHECK (block_hash ~ '^0x[0-9a-f]{64}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS rejected_logs_contract_check,
    ADD CONSTRAINT rejected_logs_contract_check CHECK (contract ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS rejected_logs_tx_hash_check,
    ADD CONSTRAINT rejected_logs_tx_hash_check CHECK (tx_hash ~ '^0x[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_block_hash_check;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_contract_check;
ALTER TABLE rejected_logs VALIDATE CONSTRAINT rejected_logs_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE ledger_hooks
    DROP CONSTRAINT IF EXISTS ledger_hooks_contract_check,
    ADD CONSTRAINT ledger_hooks_contract_check CHECK (contract ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS ledger_hooks_hook_sha256_check,
    ADD CONSTRAINT ledger_hooks_hook_sha256_check CHECK (hook_sha256 = '' OR hook_sha256 ~ '^[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE ledger_hooks VALIDATE CONSTRAINT ledger_hooks_contract_check;
ALTER TABLE ledger_hooks VALIDATE CONSTRAINT ledger_hooks_hook_sha256_check;

SET lock_timeout = '10s';
ALTER TABLE pending_payments
    DROP CONSTRAINT IF EXISTS pending_payments_block_hash_check,
    ADD CONSTRAINT pending_payments_block_hash_check CHECK (block_hash ~ '^0x[0-9a-f]{64}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_contract_check,
    ADD CONSTRAINT pending_payments_contract_check CHECK (contract ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_digest_check,
    ADD CONSTRAINT pending_payments_digest_check CHECK (digest ~ '^0x[0-9a-f]{64}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_payer_check,
    ADD CONSTRAINT pending_payments_payer_check CHECK (payer ~ '^0x[0-9a-f]{40}$') NOT VALID,
    DROP CONSTRAINT IF EXISTS pending_payments_tx_hash_check,
    ADD CONSTRAINT pending_payments_tx_hash_check CHECK (tx_hash ~ '^0x[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_block_hash_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_contract_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_digest_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_payer_check;
ALTER TABLE pending_payments VALIDATE CONSTRAINT pending_payments_tx_hash_check;

SET lock_timeout = '10s';
ALTER TABLE chain_heads
    DROP CONSTRAINT IF EXISTS chain_heads_block_hash_check,
    ADD CONSTRAINT chain_heads_block_hash_check CHECK (block_hash ~ '^0x[0-9a-f]{64}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE chain_heads VALIDATE CONSTRAINT chain_heads_block_hash_check;

SET lock_timeout = '10s';
ALTER TABLE group_contracts
    DROP CONSTRAINT IF EXISTS group_contracts_contract_check,
    ADD CONSTRAINT group_contracts_contract_check CHECK (contract ~ '^0x[0-9a-f]{40}$') NOT VALID;
RESET lock_timeout;
ALTER TABLE group_contracts VALIDATE CONSTRAINT group_contracts_contract_check;

SET lock_timeout = '10s';
ALTER TABLE head_scans
    DROP CONSTRAINT IF EXISTS head_scans_block_hash_check,
    ADD CONSTRAINT head_scans_block_hash_check CHECK (block_hash ~ '^(0x[0-9a-f]{64})?$') NOT VALID;
RESET lock_timeout;
ALTER TABLE head_scans VALIDATE CONSTRAINT head_scans_block_hash_check;
