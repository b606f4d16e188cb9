package payments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrHookMismatch means a writer's PAYMENT_HOOK_SQL differs from the one the
// writers of its contract recorded: a payment it recorded would never get
// their side effect (or would get another).
var ErrHookMismatch = errors.New("PAYMENT_HOOK_SQL differs from the one recorded for this contract")

// HookDigest is how a hook is recorded: the sha256 of the statement as
// given, lowercase hex, or "" for no hook.
func HookDigest(sql string) string {
	if strings.TrimSpace(sql) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(sql))
	return hex.EncodeToString(sum[:])
}

// AgreeOnHook records digest as the hook of contract on chain chainID if
// none is recorded yet, or if replace is set, and returns nil when the
// recorded hook is digest, or an error wrapping ErrHookMismatch when it is
// another. Every writer of the contract, whatever its group, must agree:
// who inserts a payment, and so whose hook runs, depends only on the chain
// and the contract.
func (s *Store) AgreeOnHook(ctx context.Context, chainID uint64, contract, digest string, replace bool) error {
	var recorded string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO ledger_hooks (chain_id, contract, hook_sha256) VALUES ($1, $2, $3)
		ON CONFLICT (chain_id, contract) DO UPDATE
			SET hook_sha256 = CASE WHEN $4 THEN EXCLUDED.hook_sha256 ELSE ledger_hooks.hook_sha256 END,
			    updated_at = CASE WHEN $4 AND ledger_hooks.hook_sha256 <> EXCLUDED.hook_sha256 THEN now() ELSE ledger_hooks.updated_at END
		RETURNING hook_sha256`, int64(chainID), contract, digest, replace).Scan(&recorded)
	if err != nil {
		return fmt.Errorf("recording the payment hook of contract %s: %w", contract, interpret(err))
	}
	return hookAgrees(contract, recorded, digest)
}

// HookRecords says whether CheckHook holds the hook records it read.
type HookRecords bool

const (
	// ReadHookRecords only reads them.
	ReadHookRecords HookRecords = false
	// HoldHookRecords keeps them from changing for the rest of the
	// transaction (FOR SHARE).
	HoldHookRecords HookRecords = true
)

// CheckHook returns nil when the recorded hook of each of contracts is
// digest (or none is recorded), else an error wrapping ErrHookMismatch.
// HoldHookRecords keeps the records from changing for the rest of the
// transaction, so that a writer whose hook is being replaced cannot commit
// under the old one; hold only while holding the cursor, or standbys, each
// holding the records while they wait, could keep a replacement waiting
// for ever.
func (t *Tx) CheckHook(ctx context.Context, chainID uint64, contracts []string, digest string, records HookRecords) error {
	lock := ""
	if records == HoldHookRecords {
		lock = " FOR SHARE"
	}
	keys := slices.Clone(contracts)
	slices.Sort(keys)
	for _, c := range keys {
		var recorded string
		err := t.tx.QueryRow(ctx, `SELECT hook_sha256 FROM ledger_hooks WHERE chain_id = $1 AND contract = $2`+lock,
			int64(chainID), c).Scan(&recorded)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the payment hook of contract %s: %w", c, interpret(err))
		}
		if err := hookAgrees(c, recorded, digest); err != nil {
			return err
		}
	}
	return nil
}

// hookAgrees compares the digests without printing them: a hook may carry a
// credential, and even its hash helps guess one offline.
func hookAgrees(contract, recorded, digest string) error {
	if recorded == digest {
		return nil
	}
	mine := "another hook"
	switch {
	case digest == "":
		mine = "no hook"
	case recorded == "":
		mine = "a hook"
	}
	theirs := "a hook"
	if recorded == "" {
		theirs = "no hook"
	}
	return fmt.Errorf("%w: contract %s records %s, this process runs %s", ErrHookMismatch, contract, theirs, mine)
}
