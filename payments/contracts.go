package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrContractsMismatch means the group records a contract this writer's
// BURN_CONTRACT lacks: a replica with an older configuration, whose writes
// would leave that contract's burns out. It writes nothing until its
// configuration lists the contract, or the removal is allowed.
var ErrContractsMismatch = errors.New("BURN_CONTRACT lacks a contract the group follows")

// MemberSpec is a contract as a writer's configuration names it.
type MemberSpec struct {
	Contract   string // lowercase 0x hex
	FirstBlock int64
}

// Member is a contract as its group records it.
type Member struct {
	Contract   string
	FirstBlock int64
	// LiveFrom is the first block the group's cursor reads it from; its
	// backfill covers [FirstBlock, LiveFrom-1].
	LiveFrom   int64
	Backfilled bool
	// Removed is set when the group no longer follows it; RemovedAt is
	// where the cursor stood then.
	Removed   bool
	RemovedAt int64
}

// Pending says the member's history below LiveFrom is still to be read.
func (m Member) Pending() bool { return !m.Removed && !m.Backfilled }

// SyncMembers makes the group of cur (whose row this transaction holds
// locked) follow want, and returns the members it follows. The first time a
// group is seen, every contract in want counts as followed from its first
// block. A contract new to the group is followed from the block after the
// cursor on; its history below, from its first block, is pending for its
// own backfill (none when it starts above the cursor). A contract removed
// earlier and listed again is pending for the blocks it missed. A member
// want lacks is an error wrapping ErrContractsMismatch, unless
// allowRemoval: then the group stops following it, and removed lists the
// contracts it stopped following now.
func (t *Tx) SyncMembers(ctx context.Context, cur Cursor, chainID uint64, want []MemberSpec, allowRemoval bool) (followed []Member, removed []string, err error) {
	members, err := t.members(ctx, cur.ID)
	if err != nil {
		return nil, nil, err
	}
	first := len(members) == 0
	byContract := map[string]*Member{}
	for i := range members {
		byContract[members[i].Contract] = &members[i]
	}
	changed := false
	for _, w := range want {
		m, ok := byContract[w.Contract]
		switch {
		case first:
			_, err = t.tx.Exec(ctx, `INSERT INTO group_contracts (cursor_id, chain_id, contract, first_block, live_from, backfilled_at)
				VALUES ($1, $2, $3, $4::bigint, $4::bigint, now())`, cur.ID, int64(chainID), w.Contract, w.FirstBlock)
		case !ok:
			_, err = t.tx.Exec(ctx, `INSERT INTO group_contracts (cursor_id, chain_id, contract, first_block, live_from, backfilled_at)
				VALUES ($1, $2, $3, $4::bigint, $5::bigint, CASE WHEN $4::bigint >= $5::bigint THEN now() END)`, cur.ID, int64(chainID), w.Contract, w.FirstBlock, cur.Block+1)
		case m.Removed:
			// Only the blocks missed since the removal, unless the
			// history before it was never completed.
			from := m.FirstBlock
			if m.Backfilled {
				from = max(m.RemovedAt+1, m.FirstBlock)
			}
			_, err = t.tx.Exec(ctx, `UPDATE group_contracts SET first_block = $3::bigint, live_from = $4::bigint, removed_at_block = NULL,
				backfilled_at = CASE WHEN $3::bigint >= $4::bigint THEN now() END, added_at = now()
				WHERE cursor_id = $1 AND contract = $2`, cur.ID, w.Contract, from, cur.Block+1)
		default:
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("recording contract %s in group %q: %w", w.Contract, cur.ID, interpret(err))
		}
		changed = true
	}
	var lacking []string
	for _, m := range members {
		if m.Removed || slices.ContainsFunc(want, func(w MemberSpec) bool { return w.Contract == m.Contract }) {
			continue
		}
		lacking = append(lacking, m.Contract)
	}
	if len(lacking) > 0 && !allowRemoval {
		return nil, nil, fmt.Errorf("%w: group %q follows %s (set BURN_CONTRACT to include it, or ALLOW_CONTRACT_REMOVAL=true to stop following it)",
			ErrContractsMismatch, cur.ID, strings.Join(lacking, ", "))
	}
	if len(lacking) > 0 {
		if _, err := t.tx.Exec(ctx, `UPDATE group_contracts SET removed_at_block = $2
			WHERE cursor_id = $1 AND contract = ANY($3)`, cur.ID, cur.Block, lacking); err != nil {
			return nil, nil, fmt.Errorf("removing contracts from group %q: %w", cur.ID, interpret(err))
		}
		changed = true
	}
	if !changed {
		return members, nil, nil
	}
	members, err = t.members(ctx, cur.ID)
	return members, lacking, err
}

// TakeUnfollowedPending removes and returns the pending rows of contracts on
// chain chainID that no group but group follows any more: burns seen at the
// head for a contract group just stopped following, which nobody would ever
// confirm or retract. Rows of a contract another group still follows stay
// for that group's head tracking.
func (t *Tx) TakeUnfollowedPending(ctx context.Context, group string, chainID uint64, contracts []string) ([]Pending, error) {
	if len(contracts) == 0 {
		return nil, nil
	}
	rows, err := t.tx.Query(ctx, `
		DELETE FROM pending_payments p
		WHERE p.chain_id = $1 AND p.contract = ANY($2)
		  AND NOT EXISTS (SELECT 1 FROM group_contracts g
		                  WHERE g.chain_id = $1 AND g.contract = p.contract AND g.cursor_id <> $3 AND g.removed_at_block IS NULL)
		RETURNING `+pendingColumns, int64(chainID), contracts, group)
	if err != nil {
		return nil, fmt.Errorf("settling the pending payments of contracts no longer followed: %w", interpret(err))
	}
	return scanPending(rows)
}

// GroupsFollowing returns the groups (cursor ids) on chain chainID that
// follow any of contracts now, in order.
func (s *Store) GroupsFollowing(ctx context.Context, chainID uint64, contracts []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT cursor_id FROM group_contracts
		WHERE chain_id = $1 AND contract = ANY($2) AND removed_at_block IS NULL ORDER BY cursor_id`, int64(chainID), contracts)
	if err != nil {
		return nil, fmt.Errorf("reading the groups that follow %v: %w", contracts, interpret(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading the groups that follow %v: %w", contracts, interpret(err))
	}
	return ids, nil
}

func (t *Tx) members(ctx context.Context, id string) ([]Member, error) {
	rows, err := t.tx.Query(ctx, membersQuery, id)
	if err != nil {
		return nil, fmt.Errorf("reading the contracts of group %q: %w", id, interpret(err))
	}
	return scanMembers(rows, id)
}

// Members reads the contracts group id follows or followed.
func (s *Store) Members(ctx context.Context, id string) ([]Member, error) {
	rows, err := s.pool.Query(ctx, membersQuery, id)
	if err != nil {
		return nil, fmt.Errorf("reading the contracts of group %q: %w", id, interpret(err))
	}
	return scanMembers(rows, id)
}

const membersQuery = `SELECT contract, first_block, live_from, backfilled_at IS NOT NULL,
	removed_at_block IS NOT NULL, coalesce(removed_at_block, -1)
	FROM group_contracts WHERE cursor_id = $1 ORDER BY added_at, contract`

func scanMembers(rows pgx.Rows, id string) ([]Member, error) {
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		if err := rows.Scan(&m.Contract, &m.FirstBlock, &m.LiveFrom, &m.Backfilled, &m.Removed, &m.RemovedAt); err != nil {
			return nil, fmt.Errorf("reading the contracts of group %q: %w", id, interpret(err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the contracts of group %q: %w", id, interpret(err))
	}
	return out, nil
}

// MarkBackfilled records that member contract of group id has its history
// below liveFrom; a member re-added since (another liveFrom) is left alone.
func (s *Store) MarkBackfilled(ctx context.Context, id, contract string, liveFrom int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE group_contracts SET backfilled_at = now()
		WHERE cursor_id = $1 AND contract = $2 AND live_from = $3 AND backfilled_at IS NULL AND removed_at_block IS NULL`,
		id, contract, liveFrom)
	if err != nil {
		return fmt.Errorf("marking contract %s of group %q backfilled: %w", contract, id, interpret(err))
	}
	return nil
}
