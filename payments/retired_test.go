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
// 'burnpoller') is refused every write of the ledger, with one error
// naming the release to roll to, and records nothing; this release's
// writer, which declares it, records; a session of another program (psql,
// a service) is left alone.
func TestARetiredReleaseRecordsNothing(t *testing.T) {
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

	insert := `INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		VALUES (1337, '0x` + strings.Repeat("ab", 20) + `', '0x` + strings.Repeat("01", 32) + `', 0, 7, '0x` + strings.Repeat("cd", 32) + `',
		'0x` + strings.Repeat("12", 20) + `', '0x` + strings.Repeat("34", 32) + `', 5, now())`
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := pgx.Connect(ctx, named(tc.app))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			for _, sql := range []string{
				insert,
				`UPDATE block_cursors SET last_processed_block = 9 WHERE id = 'test'`,
				`INSERT INTO ledger_commits (events) VALUES (true)`,
				`DELETE FROM pending_payments`,
			} {
				tx, err := c.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if tc.declare != "" {
					if _, err := tx.Exec(ctx, `SELECT set_config($1, $2, true)`, migrations.WriterSetting, tc.declare); err != nil {
						t.Fatal(err)
					}
				}
				_, err = tx.Exec(ctx, sql)
				_ = tx.Rollback(ctx)
				var pgErr *pgconn.PgError
				refused := errors.As(err, &pgErr) && pgErr.Code == "BP026"
				if refused != tc.refused || (!refused && err != nil) {
					t.Fatalf("%s: %v; want refused %v", sql, err, tc.refused)
				}
				if refused && !strings.Contains(pgErr.Message, "roll this replica to burnpoller v2.0.0 (revision 0123abc) or later") {
					t.Fatalf("refusal %q does not name the release to roll to", pgErr.Message)
				}
			}
		})
	}

	// This release's writer records, in a session named as the previous
	// release's would be refused.
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
