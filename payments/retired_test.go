package payments_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestARetiredReleaseRecordsNothing: once the contract step that retires
// the releases before schema 26 has run, a burnpoller session that does
// not declare the schema it writes (the previous release's, named
// 'burnpoller') has every commit that records a payment, an event or the
// head refused, the whole transaction with it, with one error naming the
// release to roll to; this release's writer, which declares it, records;
// a session of another program (psql, a service) is left alone.
func TestARetiredReleaseRecordsNothing(t *testing.T) { //nolint:tparallel // the cases share one ledger, emptied after each
	t.Parallel()
	ctx := context.Background()
	_, dbURL := pgtest.NewPool(t)
	named := func(app string) string {
		cfg, err := pgx.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.ConnString() + "&application_name=" + app
	}
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, `UPDATE schema_contracts SET release = 'v2.0.0 (revision 0123abc)' WHERE version = 26`); err != nil {
		t.Fatal(err)
	}
	s := payments.NewStore(newNamedPool(t, named(migrations.SessionName("burnpoller"))))
	if _, err := s.SeedCursor(ctx, "test", 0, ""); err != nil {
		t.Fatal(err)
	}

	// What a writer's transaction records, as the previous release writes
	// it: a payment, its event staged, the commit's row, or a head alone.
	records := map[string][]string{
		"a payment": {
			`INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
			 VALUES (1337, '0x` + strings.Repeat("ab", 20) + `', '0x` + strings.Repeat("01", 32) + `', 0, 7, '0x` + strings.Repeat("cd", 32) + `',
			 '0x` + strings.Repeat("12", 20) + `', '0x` + strings.Repeat("34", 32) + `', 5, now())`,
			`INSERT INTO ledger_commits (events) VALUES (true)`,
		},
		"the head": {`INSERT INTO ledger_commits (head_chain_id, head_block, head_hash, events) VALUES (1337, 9, '0x` + strings.Repeat("ef", 32) + `', false)`},
	}
	for _, tc := range []struct {
		name, app, declare string
		refused            bool
	}{
		{name: "the previous release", app: "burnpoller", refused: true},
		{name: "its session pool", app: "burnpoller-session", refused: true},
		{name: "a release declaring an older schema", app: "burnpoller/25", declare: "25", refused: true},
		{name: "this release", app: migrations.SessionName("burnpoller"), declare: "26"},
		{name: "another program", app: "psql"},
	} {
		for what, sqls := range records {
			t.Run(tc.name+" records "+what, func(t *testing.T) {
				c, err := pgx.Connect(ctx, named(tc.app))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(context.Background())
				tx, err := c.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(context.Background()) }()
				if tc.declare != "" {
					if _, err := tx.Exec(ctx, `SELECT set_config($1, $2, true)`, migrations.WriterSetting, tc.declare); err != nil {
						t.Fatal(err)
					}
				}
				var before int
				if err := admin.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&before); err != nil {
					t.Fatal(err)
				}
				for _, sql := range sqls {
					if _, err := tx.Exec(ctx, sql); err != nil {
						t.Fatal(err)
					}
				}
				err = tx.Commit(ctx)
				var pgErr *pgconn.PgError
				refused := errors.As(err, &pgErr) && pgErr.Code == "BPRET"
				if refused != tc.refused || (!refused && err != nil) {
					t.Fatalf("commit: %v; want refused %v", err, tc.refused)
				}
				if refused && !strings.Contains(pgErr.Message, "roll this replica to burnpoller v2.0.0 (revision 0123abc) or later") {
					t.Fatalf("refusal %q does not name the release to roll to", pgErr.Message)
				}
				var after int
				if err := admin.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&after); err != nil {
					t.Fatal(err)
				}
				if refused && after != before {
					t.Fatalf("a refused commit left %d payments, want %d", after, before)
				}
				if _, err := admin.Exec(ctx, `DELETE FROM payments`); err != nil {
					t.Fatal(err)
				}
			})
		}
	}

	// This release's writer records, in a session named as this
	// release names its own.
	if n := commitRange(t, s, "test", 0, 7, []payments.Payment{payment(2, 0, big.NewInt(9))}); n != 1 {
		t.Fatalf("this release's writer inserted %d payments, want 1", n)
	}
	var rows int
	var cursor int64
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM payments), (SELECT last_processed_block FROM block_cursors WHERE id = 'test')`).Scan(&rows, &cursor); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || cursor != 7 {
		t.Fatalf("ledger: %d payments, cursor %d; want this release's one payment and the cursor at 7", rows, cursor)
	}
}

// newNamedPool is a pool on dbURL, closed when t ends.
func newNamedPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
