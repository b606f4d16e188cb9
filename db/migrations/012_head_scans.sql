-- Where each group's head tracking stands: the last block above the
-- cursor it has read, and that block's hash. A pass reads one range from
-- there (a range as the ledger's writers size them), records what it found
-- and moves this row, in one short transaction; the next pass goes on
-- after it, so that a window far wider than one range is read in bounded
-- steps that each commit, at the cost of one range per block of head
-- movement. A pass whose first block no longer continues the hash here (a
-- reorganisation above the cursor) starts again from the cursor. A table
-- of its own: nothing here is read or locked by the ledger's writers.
CREATE TABLE head_scans (
    cursor_id    text        PRIMARY KEY CHECK (cursor_id <> '' AND length(cursor_id) <= 200),
    -- -1 and '' before the chain's first block (a cursor seeded there).
    block_number bigint      NOT NULL CHECK (block_number >= -1),
    block_hash   text        NOT NULL CHECK (block_hash ~ '^(0x[0-9a-f]{64})?$'),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE head_scans IS 'Per group: the last block above its cursor head tracking has read, to go on from.';

---- create above / drop below ----

DROP TABLE head_scans;
