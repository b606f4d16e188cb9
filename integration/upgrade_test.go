package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// previousPoller is the previous release's poller (harness.PreviousRelease),
// built once from this repository's history into binDir; its name there.
var previousPoller = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return harness.BuildRelease(ctx, harness.PreviousRelease, "poller", filepath.Join(binDir, "poller-previous"))
})

// previous builds, once, the previous release's poller and returns its name
// in binDir. Without the release in this clone's history the test fails,
// saying so: it never skips.
func previous(t *testing.T) string {
	t.Helper()
	if err := previousPoller(); err != nil {
		t.Fatal(err)
	}
	return "poller-previous"
}

// upgradeRun is a dev chain with a trickle of burns, a database the
// previous release migrated, and what watches them: the replicas started,
// and how long the cursor took to reach each finality target the node
// showed.
type upgradeRun struct {
	t        *testing.T
	info     devchain.Info
	dbURL    string
	pool     *pgxpool.Pool
	replicas []*proc

	mu      sync.Mutex
	firstAt map[uint64]time.Time // when each target was first seen
	lag     time.Duration        // the longest time a seen target waited for the cursor
	lagAt   uint64
	stop    chan struct{}
	stopped chan struct{}
}

// upgradePoll is the replicas' POLL_INTERVAL: no stall may be longer than
// it and a second.
const upgradePoll = time.Second

func newUpgradeRun(t *testing.T) *upgradeRun {
	t.Helper()
	prev := previous(t)
	_, info := startDevchain(t, "--block-time", "250ms", "--burn-rate", "4")
	r := &upgradeRun{t: t, info: info, dbURL: pgtest.NewDatabase(t), firstAt: map[uint64]time.Time{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	if out, code := runBinary(t, prev, []string{"DATABASE_URL=" + r.dbURL}, "migrate"); code != 0 || !strings.Contains(out, "schema at version 23") {
		t.Fatalf("the previous release's migrate: exit %d\n%s", code, out)
	}
	pool, err := pgxpool.New(context.Background(), r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.pool = pool
	return r
}

// start runs a replica of bin.
func (r *upgradeRun) start(name, bin string, extra ...string) (*proc, string) {
	r.t.Helper()
	addr := freeAddr(r.t)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, addr,
		append([]string{"POLL_INTERVAL=" + upgradePoll.String(), "LOG_FORMAT=json"}, extra...)...)
	p := startProc(r.t, name, env, bin)
	r.replicas = append(r.replicas, p)
	return p, addr
}

// finalized is the node's finality target.
func (r *upgradeRun) finalized() (uint64, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["finalized",false]}`
	resp, err := http.Post(r.info.RPCURL, "application/json", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var reply struct {
		Result struct {
			Number string `json:"number"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimPrefix(reply.Result.Number, "0x"), 16, 64)
}

// watch samples the target and the cursor every 50 ms until stopWatching,
// keeping the longest time a target waited for the cursor.
func (r *upgradeRun) watch() {
	go func() {
		defer close(r.stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			target, err := r.finalized()
			if err != nil {
				continue
			}
			now := time.Now()
			var cursor int64
			if err := r.pool.QueryRow(context.Background(), `SELECT coalesce(max(last_processed_block), -1) FROM block_cursors`).Scan(&cursor); err != nil {
				continue
			}
			r.mu.Lock()
			if _, ok := r.firstAt[target]; !ok {
				r.firstAt[target] = now
			}
			for f, at := range r.firstAt {
				if int64(f) <= cursor {
					delete(r.firstAt, f)
					continue
				}
				if d := now.Sub(at); d > r.lag {
					r.lag, r.lagAt = d, f
				}
			}
			r.mu.Unlock()
		}
	}()
}

func (r *upgradeRun) stopWatching() (time.Duration, uint64) {
	close(r.stop)
	<-r.stopped
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lag, r.lagAt
}

// cursor is the cursor's block.
func (r *upgradeRun) cursor() int64 { return cursorBlock(r.t, r.pool) }

// caughtUpWith waits until the node's target moves past where it is now,
// then until the cursor reaches it, and returns it: the replicas recorded
// a finality step taken after the call.
func (r *upgradeRun) caughtUpWith(what string) int64 {
	r.t.Helper()
	var now, target uint64
	waitFor(r.t, time.Minute, "the node's finality target", func() bool {
		f, err := r.finalized()
		now = f
		return err == nil
	})
	waitFor(r.t, time.Minute, fmt.Sprintf("%s: the target past %d", what, now), func() bool {
		f, err := r.finalized()
		target = f
		return err == nil && f > now
	})
	waitFor(r.t, 2*time.Minute, fmt.Sprintf("%s: the cursor at target %d", what, target), func() bool { return r.cursor() >= int64(target) })
	return int64(target)
}

// noPollFailed fails the test if a replica logged a failed poll.
func (r *upgradeRun) noPollFailed() {
	r.t.Helper()
	for _, p := range r.replicas {
		if out := p.out.String(); strings.Contains(out, "poll failed") {
			r.t.Errorf("%s logged a failed poll:\n%s", p.name, tail(grepLines(out, "poll failed"), 5))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pauseOldWriterOnce makes the next previous-release transaction that moves
// the cursor sleep for d inside it, holding the cursor row, and returns a
// function giving the sleeping backend's pid (0 while none).
func (r *upgradeRun) pauseOldWriterOnce(d time.Duration) func() int32 {
	r.t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE test_pause (armed boolean NOT NULL)`,
		`INSERT INTO test_pause VALUES (true)`,
		fmt.Sprintf(`CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_setting('application_name') = 'burnpoller' THEN
				UPDATE test_pause SET armed = false WHERE armed;
				IF FOUND THEN PERFORM pg_sleep(%f); END IF;
			END IF;
			RETURN NULL;
		END $$`, d.Seconds()),
		`CREATE TRIGGER test_pause BEFORE UPDATE ON block_cursors FOR EACH STATEMENT EXECUTE FUNCTION test_pause()`,
	} {
		if _, err := r.pool.Exec(ctx, q); err != nil {
			r.t.Fatalf("%s: %v", q, err)
		}
	}
	return func() int32 {
		var pid int32
		_ = r.pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep' AND application_name = 'burnpoller'`).Scan(&pid)
		return pid
	}
}

// TestRollingUpgradeFromThePreviousRelease: two replicas of the previous
// release record a trickle of burns; this tree's `poller migrate` runs
// beside them (its contract step left pending), and `poller migrate
// --contract` waits; the replicas are replaced one by one, the first
// holder SIGTERMed in the middle of a range transaction. The old replicas
// commit through the migration and no poll fails; no target waits for the
// cursor longer than the poll interval and a second; the contract step
// runs once the last old replica is gone; the ledger equals the chain, the
// event seqs are gap-free and every payment is confirmed.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	t.Parallel()
	r := newUpgradeRun(t)
	prev := previous(t)
	oldA, addrA := r.start("previous-a", prev)
	oldB, addrB := r.start("previous-b", prev)
	r.watch()
	waitFor(t, 2*time.Minute, "the previous release recording", func() bool {
		var n int
		_ = r.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n)
		return n > 0
	})

	env := []string{"DATABASE_URL=" + r.dbURL, "LOG_FORMAT=json"}
	out, code := runPoller(t, env, "migrate")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("schema at version %d (was 23)", migrations.Compatible())) ||
		!strings.Contains(out, fmt.Sprintf("contract step %d", migrations.Latest())) || !strings.Contains(out, "pending") {
		t.Fatalf("poller migrate beside the previous release: exit %d\n%s", code, out)
	}
	contract := startProc(t, "migrate-contract", env, "poller", "migrate", "--contract")
	// The old replicas go on committing on the expanded schema.
	r.caughtUpWith("the previous release after the migration")

	newA, newAddrA := r.start("new-a", "poller", "MIGRATE=false")
	waitFor(t, time.Minute, "the first new replica ready", func() bool { return httpStatus("http://"+newAddrA+"/readyz") == 200 })
	sleeping := r.pauseOldWriterOnce(300 * time.Millisecond)
	waitFor(t, time.Minute, "an old replica in the middle of a range transaction", func() bool { return sleeping() != 0 })
	first, second := oldA, oldB
	if held, _ := scrape(addrB, "burnpoller_lock_held"); held == 1 {
		first, second = oldB, oldA
	}
	first.signal(syscall.SIGTERM)
	if code := first.wait(t, time.Minute); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM in the middle of a range transaction", first.name, code)
	}
	_ = addrA
	r.caughtUpWith("after the first old replica stopped")
	if contract.p.Exited() {
		t.Fatalf("the contract step ran while %s lived:\n%s", second.name, contract.out.String())
	}

	_, newAddrB := r.start("new-b", "poller", "MIGRATE=false")
	waitFor(t, time.Minute, "the second new replica ready", func() bool { return httpStatus("http://"+newAddrB+"/readyz") == 200 })
	second.signal(syscall.SIGTERM)
	if code := second.wait(t, time.Minute); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM", second.name, code)
	}
	lastOld := time.Now()
	// It runs once nothing of the previous release has been seen for its
	// quiet time: the old replicas' commits count for a minute
	// (release_sightings), then 30 s of looking.
	if code := contract.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("poller migrate --contract exited %d:\n%s", code, contract.out.String())
	}
	if out := contract.out.String(); !strings.Contains(out, "waiting for the replicas of older releases") ||
		!strings.Contains(out, fmt.Sprintf("schema at version %d", migrations.Latest())) {
		t.Fatalf("poller migrate --contract did not say what it waited for, or did not migrate:\n%s", out)
	}
	var (
		appliedAt time.Time
		forced    bool
	)
	if err := r.pool.QueryRow(context.Background(), `SELECT applied_at, forced FROM schema_contracts WHERE version = $1`, migrations.Latest()).Scan(&appliedAt, &forced); err != nil {
		t.Fatal(err)
	}
	if forced || appliedAt.Before(lastOld.Add(-time.Second)) {
		t.Fatalf("contract step applied at %s (forced %v), the last old replica stopped at %s", appliedAt, forced, lastOld)
	}

	to := r.caughtUpWith("after the contract step")
	lag, at := r.stopWatching()
	for _, p := range []*proc{newA} {
		p.signal(syscall.SIGTERM)
	}
	r.noPollFailed()
	if lag > upgradePoll+time.Second {
		t.Errorf("target %d waited %s for the cursor, over the poll interval and a second", at, lag)
	}
	t.Logf("the longest a target waited for the cursor: %s (target %d)", lag, at)
	rows := assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(to))
	auditEvents(t, r.pool, r.info.ChainID)
	var unconfirmed int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments p WHERE block_number <= $1
		AND NOT EXISTS (SELECT 1 FROM payment_events e WHERE e.kind = 'confirmed' AND e.payment_id = p.id)`, to).Scan(&unconfirmed); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || unconfirmed != 0 {
		t.Fatalf("%d payments up to block %d, %d of them without a confirmed event", len(rows), to, unconfirmed)
	}
}

// TestAForgottenReplicaOfThePreviousReleaseIsRefused: a contract step
// forced while a replica of the previous release still runs refuses every
// write of that replica, with one error naming the release to roll to, and
// it records nothing; a replica of this release records every burn.
func TestAForgottenReplicaOfThePreviousReleaseIsRefused(t *testing.T) {
	t.Parallel()
	r := newUpgradeRun(t)
	old, _ := r.start("previous", previous(t))
	r.caughtUpWith("the previous release")
	env := []string{"DATABASE_URL=" + r.dbURL}
	if out, code := runPoller(t, env, "migrate"); code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("poller migrate beside the previous release: exit %d\n%s", code, out)
	}
	if out, code := runPoller(t, env, "migrate", "--status"); code != 0 || !strings.Contains(out, "session burnpoller") {
		t.Fatalf("poller migrate --status does not name the old replica's sessions: exit %d\n%s", code, out)
	}
	out, code := runPoller(t, env, "migrate", "--contract", "--force")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("schema at version %d", migrations.Latest())) {
		t.Fatalf("poller migrate --contract --force: exit %d\n%s", code, out)
	}
	var forced bool
	if err := r.pool.QueryRow(context.Background(), `SELECT forced FROM schema_contracts WHERE version = $1`, migrations.Latest()).Scan(&forced); err != nil || !forced {
		t.Fatalf("schema_contracts says forced %v (%v), want true", forced, err)
	}
	waitFor(t, time.Minute, "the old replica refused", func() bool {
		return strings.Contains(old.out.String(), "this burnpoller release is retired")
	})
	if refusal := grepLines(old.out.String(), "retired"); !strings.Contains(refusal, "roll this replica to burnpoller dev (revision ") {
		t.Fatalf("the refusal does not name the release to roll to:\n%s", tail(refusal, 3))
	}
	// It records no payment, event or pending row (a range of blocks
	// without a burn may still move its cursor: nothing to record there).
	var before, after struct {
		rows    int
		events  int
		pending int
	}
	snapshot := func(s *struct {
		rows    int
		events  int
		pending int
	}) {
		if err := r.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM payments),
			(SELECT count(*) FROM payment_events), (SELECT count(*) FROM pending_payments)`).Scan(&s.rows, &s.events, &s.pending); err != nil {
			t.Fatal(err)
		}
	}
	snapshot(&before)
	target, _ := r.finalized()
	waitFor(t, time.Minute, "the target to move on", func() bool { f, err := r.finalized(); return err == nil && f > target+8 })
	snapshot(&after)
	if after != before {
		t.Fatalf("the retired replica recorded: %+v, then %+v", before, after)
	}

	fresh, _ := r.start("new", "poller", "MIGRATE=false")
	to := r.caughtUpWith("this release's replica")
	fresh.signal(syscall.SIGTERM)
	old.signal(syscall.SIGTERM)
	assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(to))
	auditEvents(t, r.pool, r.info.ChainID)
	if out := fresh.out.String(); strings.Contains(out, "poll failed") {
		t.Fatalf("this release's replica failed a poll:\n%s", tail(grepLines(out, "poll failed"), 5))
	}
}
