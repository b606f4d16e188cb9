package payments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrHookMismatch means a writer's PAYMENT_HOOK_SQL differs from the one its
// group recorded: a payment it recorded would never get the group's side
// effect (or would get another).
var ErrHookMismatch = errors.New("PAYMENT_HOOK_SQL differs from the one the group recorded")

// HookDigest is how a group records its hook: the sha256 of the statement as
// given, lowercase hex, or "" for no hook.
func HookDigest(sql string) string {
	if strings.TrimSpace(sql) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(sql))
	return hex.EncodeToString(sum[:])
}

// AgreeOnHook records digest as group's hook if the group has none yet, or
// if replace is set, and returns nil when the group's hook is digest, or an
// error wrapping ErrHookMismatch naming both when it is another.
func (s *Store) AgreeOnHook(ctx context.Context, group, digest string, replace bool) error {
	var recorded string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO group_hooks (group_id, hook_sha256) VALUES ($1, $2)
		ON CONFLICT (group_id) DO UPDATE
			SET hook_sha256 = CASE WHEN $3 THEN EXCLUDED.hook_sha256 ELSE group_hooks.hook_sha256 END,
			    updated_at = CASE WHEN $3 AND group_hooks.hook_sha256 <> EXCLUDED.hook_sha256 THEN now() ELSE group_hooks.updated_at END
		RETURNING hook_sha256`, group, digest, replace).Scan(&recorded)
	if err != nil {
		return fmt.Errorf("recording the payment hook of group %q: %w", group, interpret(err))
	}
	return hookAgrees(group, recorded, digest)
}

// CheckHook returns nil when group's recorded hook is digest (or the group
// has recorded none), else an error wrapping ErrHookMismatch. Every range
// transaction checks it, so that a writer whose hook the group has since
// replaced stops writing.
func (t *Tx) CheckHook(ctx context.Context, group, digest string) error {
	var recorded string
	err := t.tx.QueryRow(ctx, `SELECT hook_sha256 FROM group_hooks WHERE group_id = $1`, group).Scan(&recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the payment hook of group %q: %w", group, interpret(err))
	}
	return hookAgrees(group, recorded, digest)
}

// hookAgrees compares the digests without printing them: a hook may carry a
// credential, and even its hash helps guess one offline.
func hookAgrees(group, recorded, digest string) error {
	if recorded == digest {
		return nil
	}
	return fmt.Errorf("%w: group %q records %s, this process runs %s", ErrHookMismatch, group, describeHook(recorded), describeHook(digest))
}

func describeHook(digest string) string {
	if digest == "" {
		return "no hook"
	}
	return "a hook"
}
