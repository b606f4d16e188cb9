-- The contracts each poller group follows, and from which block its cursor
-- covers each one. A contract added to a group whose cursor is past the
-- contract's first block has a history below the cursor that the group has
-- not read: it is backfilled on its own cursor, and backfilled_at says when
-- that was done. A removed contract keeps its row with removed_at_block, so
-- that adding it again backfills only the blocks it missed.
CREATE TABLE group_contracts (
    cursor_id        text        NOT NULL CHECK (cursor_id <> '' AND length(cursor_id) <= 200),
    chain_id         bigint      NOT NULL CHECK (chain_id > 0),
    contract         text        NOT NULL CHECK (contract ~ '^0x[0-9a-f]{40}$'),
    -- The contract's first block (BURN_CONTRACT's @block, else START_BLOCK).
    first_block      bigint      NOT NULL CHECK (first_block >= 0),
    -- The group's cursor reads the contract from this block on; below it,
    -- from first_block, the contract's own backfill does.
    live_from        bigint      NOT NULL CHECK (live_from >= 0),
    -- Set once [first_block, live_from - 1] is recorded (at once when empty).
    backfilled_at    timestamptz,
    -- Set when the group stopped following the contract: the cursor then
    -- stood at this block.
    removed_at_block bigint,
    added_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cursor_id, contract)
);

COMMENT ON TABLE group_contracts IS 'Contracts per poller group, the block each is followed from, and the backfill of a contract added later.';

-- Groups that exist already follow the contract their default cursor id
-- names, and always have.
INSERT INTO group_contracts (cursor_id, chain_id, contract, first_block, live_from, backfilled_at)
SELECT id, split_part(id, ':', 1)::bigint, split_part(id, ':', 2), 0, 0, now()
FROM block_cursors
WHERE id ~ '^[1-9][0-9]{0,17}:0x[0-9a-f]{40}$';

---- create above / drop below ----

DROP TABLE group_contracts;
