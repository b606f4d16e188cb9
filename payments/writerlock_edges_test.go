package payments_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestAWriterOfThePreviousReleaseUnderSetRoleIsWaitedFor: during a
// rollout the writers of this release keep the previous release's writers
// of a contract out by taking their advisory lock too, and wait for it
// only while "its holder's role may insert payments" — read from
// pg_stat_activity.usesysid, the session's login role. A writer whose login
// role is NOINHERIT and writes through SET ROLE (or options=-c
// role=burnpoller_runtime in its DATABASE_URL, a common way to give one
// login role the runtime role's rights) holds the lock with a session user
// that has no INSERT of its own: this release's writer takes it for a
// stranger's, passes it by, and the two write the contract at once. What
// should hold: a session that may act as a role that inserts payments
// (pg_has_role ... 'MEMBER') is a writer, and is waited for.
func TestAWriterOfThePreviousReleaseUnderSetRoleIsWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := pgtest.NewPool(t)
	store := payments.NewStore(pool)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	group, login := "bpwriters_"+hex.EncodeToString(b), "bpwlogin_"+hex.EncodeToString(b)
	for _, sql := range []string{
		`CREATE ROLE ` + group + ` NOLOGIN`,
		`GRANT SELECT, INSERT ON payments TO ` + group,
		`CREATE ROLE ` + login + ` LOGIN NOINHERIT PASSWORD 'w-pw' IN ROLE ` + group,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+group+`; DROP ROLE IF EXISTS `+login+`; DROP ROLE IF EXISTS `+group)
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(login, "w-pw")
	old, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close(context.Background()) })
	if _, err := old.Exec(ctx, `SET ROLE `+group); err != nil {
		t.Fatal(err)
	}
	var may bool
	if err := old.QueryRow(ctx, `SELECT has_table_privilege('payments', 'INSERT')`).Scan(&may); err != nil || !may {
		t.Fatalf("the writer's session may insert payments = %v, %v; want true", may, err)
	}

	const chainID = 1337
	contract := payment(1, 0, nil).Contract
	lockWriters := func() error {
		tx, err := store.Begin(ctx, limits)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		return tx.LockWriters(ctx, chainID, []string{contract})
	}
	if err := lockWriters(); err != nil { // the contract's row
		t.Fatal(err)
	}
	// The previous release's writer, in its range transaction.
	oldTx, err := old.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oldTx.Rollback(context.Background()) }()
	if _, err := oldTx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('burnpoller writers ' || $1::text || ' ' || $2, 0))`,
		"1337", contract); err != nil {
		t.Fatal(err)
	}
	if err := lockWriters(); !errors.Is(err, payments.ErrWritersBusy) {
		t.Fatalf("LockWriters while a writer of the previous release (login role NOINHERIT, SET ROLE to a writer) is in its range transaction = %v, want ErrWritersBusy", err)
	}
}
