package payments_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// loginRole creates a login role for this test (roles are cluster-wide),
// with no grants unless in names a role it joins (NOINHERIT: it acts as
// that role only after SET ROLE, which it does), and returns a connection
// to dbURL as it.
func loginRole(t *testing.T, ctx context.Context, admin *pgx.Conn, dbURL, in string) *pgx.Conn {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "bplogin_" + hex.EncodeToString(b)
	create := `CREATE ROLE ` + name + ` LOGIN PASSWORD 'nogrant-pw'`
	if in != "" {
		create += ` NOINHERIT IN ROLE ` + in
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, "nogrant-pw")
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close(context.Background())
		_, _ = admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+name)
	})
	if in != "" {
		if _, err := conn.Exec(ctx, `SET ROLE `+in); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// TestOnlyAWriterCanStopTheWriters: the writers of a contract keep each
// other apart by its row of writer_locks, which a role without write
// rights cannot lock; the previous release's advisory lock, which any role
// can take, is waited for only while a writer holds it.
func TestOnlyAWriterCanStopTheWriters(t *testing.T) { //nolint:tparallel // the cases share one database and its locks, in turn
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := pgtest.NewPool(t)
	store := payments.NewStore(pool)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	stranger := loginRole(t, ctx, admin, dbURL, "")
	// A writer of the previous release whose login role is NOINHERIT and
	// writes as a writers' role through SET ROLE (or options=-c role=…):
	// its session's user may not insert payments, the role it acts as may.
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	writers := "bpwriters_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, `CREATE ROLE `+writers+` NOLOGIN; GRANT SELECT, INSERT ON payments TO `+writers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+writers+`; DROP ROLE IF EXISTS `+writers)
	})
	setRole := loginRole(t, ctx, admin, dbURL, writers)
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
	// The contract's row exists once a writer has locked it.
	if err := lockWriters(); err != nil {
		t.Fatalf("first writer: %v", err)
	}

	// A role without write rights can lock neither the row nor the table.
	for _, sql := range []string{
		`SELECT 1 FROM writer_locks FOR UPDATE`,
		`SELECT 1 FROM writer_locks FOR KEY SHARE`,
		`LOCK TABLE writer_locks IN ROW SHARE MODE`,
		`LOCK TABLE writer_locks IN EXCLUSIVE MODE`,
		`INSERT INTO writer_locks VALUES (1, '0x` + "0000000000000000000000000000000000000001" + `')`,
	} {
		err := pgx.BeginFunc(ctx, stranger, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql)
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("a role with no grants: %s = %v, want permission denied (42501)", sql, err)
		}
	}

	key := `hashtextextended('burnpoller writers ' || $1::text || ' ' || $2, 0)`
	for _, tc := range []struct {
		name   string
		holder *pgx.Conn
		want   error
	}{
		{name: "a role with no grants holds the previous release's writer lock", holder: stranger, want: nil},
		{name: "a writer of the previous release holds it", holder: admin, want: payments.ErrWritersBusy},
		{name: "a writer of the previous release under SET ROLE holds it", holder: setRole, want: payments.ErrWritersBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Session-level, outside any transaction: no server bound
			// ends it.
			if _, err := tc.holder.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, "1337", contract); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err := lockWriters()
			if _, uerr := tc.holder.Exec(ctx, `SELECT pg_advisory_unlock(`+key+`)`, "1337", contract); uerr != nil {
				t.Fatal(uerr)
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("LockWriters = %v, want %v", err, tc.want)
			}
			if tc.want != nil && time.Since(start) < limits.LockWait {
				t.Fatalf("LockWriters gave up after %s, before the lock wait %s", time.Since(start), limits.LockWait)
			}
			if err := lockWriters(); err != nil {
				t.Fatalf("LockWriters once the key is free = %v", err)
			}
		})
	}

	// A writer of this release keeps another out until it ends, and a
	// writer of the previous release out too.
	tx, err := store.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.LockWriters(ctx, chainID, []string{contract}); err != nil {
		t.Fatal(err)
	}
	if err := lockWriters(); !errors.Is(err, payments.ErrWritersBusy) {
		t.Fatalf("a second writer beside the first = %v, want ErrWritersBusy", err)
	}
	var got bool
	if err := admin.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`, "1337", contract).Scan(&got); err != nil || got {
		t.Fatalf("the previous release's writer took its lock beside this release's writer (%v, %v)", got, err)
	}
	tx.Rollback()
	if err := lockWriters(); err != nil {
		t.Fatalf("a writer once the first ended = %v", err)
	}
}
