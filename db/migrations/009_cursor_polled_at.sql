-- When a live group last read the chain while caught up. Replicas of a
-- group take turns on the cursor row; one that takes it while another read
-- the chain less than a poll interval ago, and nothing has woken it since,
-- lets that read stand instead of asking the node again: the node sees one
-- poll per interval, not one per replica. Adding a nullable column without
-- a default rewrites nothing, on a populated table too.
ALTER TABLE block_cursors ADD COLUMN polled_at timestamptz;

COMMENT ON COLUMN block_cursors.polled_at IS 'When a replica of the group last read the chain and left the cursor at the finality target.';

---- create above / drop below ----

ALTER TABLE block_cursors DROP COLUMN polled_at;
