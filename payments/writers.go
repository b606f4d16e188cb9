package payments

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// LockWriters waits, within the lock limit, until no other transaction is
// recording payments of contracts on chain chainID, and keeps them from
// starting until this one ends. Writers of the same contract lock different
// cursor rows (the live group's, a backfill's); without this, two of them
// could each check the ledger before the other's rows commit.
//
// The lock is the contracts' rows of writer_locks, taken FOR UPDATE in
// contract order: a row lock needs UPDATE there, which only the writers
// have, so no reader can hold it (an advisory lock, which any role may
// take, could be held by a consumer's session for as long as it lives).
// A contract's row is added the first time one of its writers locks it.
//
// Until every replica runs this release, the writers of the previous one,
// which take an advisory lock alone, are kept out by taking it too, unless
// no role its session's user belongs to (directly, by SET ROLE or by
// inheritance) may insert payments: such a session is no writer,
// and waiting for it would hand every role the right to stop the writers.
func (t *Tx) LockWriters(ctx context.Context, chainID uint64, contracts []string) error {
	keys := slices.Clone(contracts)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	started, added := time.Now(), false
	for {
		locked, free, err := t.lockWriterRows(ctx, chainID, keys)
		switch {
		case err == nil && locked < len(keys) && !added:
			// A contract's first writer adds its row: one waiting on this
			// insert finds the row once this transaction ends, and locks it.
			_, err = t.tx.Exec(ctx, `INSERT INTO writer_locks (chain_id, contract)
				SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, int64(chainID), keys)
			added = true
		case err == nil && locked < len(keys):
			err = fmt.Errorf("locked %d of %d writer rows", locked, len(keys))
		case err == nil && free:
			return nil
		case err == nil && t.limits.LockWait > 0 && time.Since(started) >= t.limits.LockWait:
			err = fmt.Errorf("%w: a writer of the previous release held its advisory lock for %s", ErrWritersBusy, t.limits.LockWait)
		case err == nil:
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(legacyWriterPoll):
			}
		}
		if err != nil {
			return fmt.Errorf("waiting for the other writers of contracts %v: %w", keys, interpretLock(err, ErrWritersBusy))
		}
	}
}

// legacyWriterPoll is how often a writer asks again for the previous
// release's advisory lock while a writer of that release holds it.
const legacyWriterPoll = 20 * time.Millisecond

// lockWriterRows locks the rows of writer_locks of contracts, in contract
// order so that writers of overlapping sets cannot deadlock, and counts
// them; then, row by locked row, it tries the advisory lock the previous
// release's writers take: free is false while a session whose role may
// insert payments holds one of them.
func (t *Tx) lockWriterRows(ctx context.Context, chainID uint64, contracts []string) (locked int, free bool, err error) {
	err = t.tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_and(
			CASE WHEN pg_try_advisory_xact_lock(w.key) THEN true
			ELSE NOT EXISTS (
				SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
				  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				  AND l.classid = ((w.key >> 32) & 4294967295)::oid
				  AND l.objid = (w.key & 4294967295)::oid
				  AND EXISTS (SELECT 1 FROM pg_roles r WHERE pg_has_role(a.usesysid, r.oid, 'MEMBER')
				              AND has_table_privilege(r.oid, 'payments', 'INSERT')))
			END), true)
		FROM (SELECT hashtextextended('burnpoller writers ' || $3 || ' ' || contract, 0) AS key
		      FROM writer_locks WHERE chain_id = $1 AND contract = ANY($2)
		      ORDER BY contract FOR UPDATE) AS w`,
		int64(chainID), contracts, strconv.FormatUint(chainID, 10)).Scan(&locked, &free)
	return locked, free, err
}
