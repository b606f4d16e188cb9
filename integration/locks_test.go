package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// ternLock is tern's own migration lock, which the previous release's
// migrators take after LockKey.
const ternLock = 9628173550095224

// TestOnlyAWriterCanStopAWriter: whatever the runtime role, a consumer
// and a login role with no grants hold of what they may take (the
// migrations' advisory locks, the writers' advisory lock of each contract,
// a transaction reading the schema version), `poller migrate` completes,
// and, against the consumer and the role with no grants, a replica records
// every burn exactly. The locks that keep migrators and writers apart are
// a table and rows none of them may lock.
func TestOnlyAWriterCanStopAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	rl := applyAllRoles(t, dbURL, strings.TrimPrefix(u.Path, "/"))
	migrateURL := asRole(t, dbURL, rl.migrate, "migrate-pw")
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	suffix := randomSuffix()
	consumerLogin, stranger := "bpcl_"+suffix, "bpn_"+suffix
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'consumer-pw' IN ROLE %s; CREATE ROLE %s LOGIN PASSWORD 'stranger-pw'`,
		consumerLogin, rl.consumer, stranger)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.ServerURL(t).String())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `DROP ROLE IF EXISTS `+consumerLogin+`; DROP ROLE IF EXISTS `+stranger)
	})
	connect := func(role, password string) *pgx.Conn {
		c, err := pgx.Connect(ctx, asRole(t, dbURL, role, password))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	mig := connect(rl.migrate, "migrate-pw")
	roles := []struct {
		name string
		conn *pgx.Conn
	}{
		{"runtime", connect(rl.runtime, "runtime-pw")},
		{"consumer", connect(consumerLogin, "consumer-pw")},
		{"no grants", connect(stranger, "stranger-pw")},
	}

	// A migration: each role holds the migrations' locks it can take
	// while `poller migrate` runs the last step.
	for _, r := range roles {
		if _, err := migrations.MigrateTo(ctx, mig, migrations.Latest()-1); err != nil {
			t.Fatal(err)
		}
		for _, sql := range []string{
			`LOCK TABLE ` + migrations.VersionTable + ` IN EXCLUSIVE MODE`,
			`LOCK TABLE ` + migrations.VersionTable + ` IN ROW SHARE MODE`,
			`SELECT version FROM ` + migrations.VersionTable + ` FOR UPDATE`,
		} {
			if err := denied(ctx, r.conn, sql); err != nil {
				t.Errorf("%s role: %v", r.name, err)
			}
		}
		if _, err := r.conn.Exec(ctx, `SELECT pg_advisory_lock($1), pg_advisory_lock($2)`, int64(migrations.LockKey), int64(ternLock)); err != nil {
			t.Fatal(err)
		}
		// In a transaction left open: reading the version, and a write of
		// it prepared (locked at parse time, before privileges are
		// checked: ROW EXCLUSIVE); the role with no grants may not even
		// name the table.
		_, _ = r.conn.Exec(ctx, `BEGIN; SELECT version FROM `+migrations.VersionTable+`;
			PREPARE held AS UPDATE `+migrations.VersionTable+` SET version = 0`)
		// --contract --force: the last step is the contract step, which
		// poller migrate would otherwise run only after 30 s of quiet.
		out, code := runPoller(t, []string{"DATABASE_URL=" + migrateURL}, "migrate", "--contract", "--force")
		want := fmt.Sprintf("schema at version %d (was %d)", migrations.Latest(), migrations.Latest()-1)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("poller migrate while the %s role holds the migrations' advisory locks: exit %d\n%s", r.name, code, out)
		}
		if _, err := r.conn.Exec(ctx, `ROLLBACK; DEALLOCATE ALL; SELECT pg_advisory_unlock_all()`); err != nil {
			t.Fatal(err)
		}
	}

	// The writers: the consumer holds the writers' advisory lock of the
	// burn contract, the role with no grants that of the second contract
	// the replica follows; neither may lock their rows.
	fr := newFaultRun(t, 1)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	fr.pool, fr.dbURL = pool, asRole(t, dbURL, rl.runtime, "runtime-pw")
	second := fr.info.Token
	for i, c := range []string{strings.ToLower(fr.info.BurnContract.Hex()), strings.ToLower(second.Hex())} {
		holder := roles[1+i]
		if _, err := holder.conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('burnpoller writers ' || $1::text || ' ' || $2, 0))`,
			strconv.FormatUint(fr.info.ChainID, 10), c); err != nil {
			t.Fatal(err)
		}
	}
	fr.startPoller("MIGRATE=false", "BURN_CONTRACT="+fr.info.BurnContract.Hex()+","+second.Hex())
	fr.caughtUp(2 * time.Minute)
	for _, r := range roles[1:] {
		for _, sql := range []string{`SELECT 1 FROM writer_locks FOR UPDATE`, `LOCK TABLE writer_locks IN EXCLUSIVE MODE`} {
			if err := denied(ctx, r.conn, sql); err != nil {
				t.Errorf("%s role: %v", r.name, err)
			}
		}
	}
	fr.finish(time.Minute)
	var locked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM writer_locks`).Scan(&locked); err != nil || locked != 2 {
		t.Fatalf("%d rows in writer_locks (%v), want the two contracts'", locked, err)
	}
}

// denied runs sql in a transaction of its own on c and says why unless it
// was refused for want of a privilege (42501), or because the role may not
// even name the table (42P01: db/roles.sql takes USAGE on public from the
// roles it does not name).
func denied(ctx context.Context, c *pgx.Conn, sql string) error {
	err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42501" || pgErr.Code == "42P01") {
		return nil
	}
	return fmt.Errorf("%s = %w, want permission denied (42501) or no such table (42P01)", sql, err)
}
