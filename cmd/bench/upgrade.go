package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/harness"
)

// Upgrade is a ledger of real size migrated from the previous release's
// schema to this tree's while replicas record: the previous release's
// during the expand steps, this tree's during the contract step (issue 39).
type Upgrade struct {
	Payments    int     `json:"payments"`
	Hook        string  `json:"payment_hook_sql,omitempty"`
	SeedSeconds float64 `json:"seed_seconds"`
	From        int32   `json:"from_version"`
	Steps       []UpgradeStep
	// LongestWriterWaitMs is the longest a writer's session waited for a
	// table lock (pg_locks.waitstart, sampled every 5 ms) from the first
	// step to the last.
	LongestWriterWaitMs float64 `json:"longest_writer_wait_ms"`
	// Recorded is how many burns the replicas recorded while the steps ran.
	Recorded int `json:"payments_recorded_meanwhile"`
}

// UpgradeStep is one migration applied: how long it took (its retries
// included) and the longest a writer waited for a table lock meanwhile.
type UpgradeStep struct {
	Version             int32   `json:"version"`
	Name                string  `json:"name"`
	Writers             string  `json:"writers"`
	TookMs              float64 `json:"took_ms"`
	LongestWriterWaitMs float64 `json:"longest_writer_wait_ms"`
	end                 time.Time
}

// waitSample is the longest wait for a table lock among the writers'
// sessions at one moment.
type waitSample struct {
	at   time.Time
	wait time.Duration
}

// upgradePhase seeds a ledger of o.upgradePayments payments, each with its
// confirmed event and a delivered webhook, at the schema the previous
// release migrates to; runs two replicas of that release on anvil with a
// burn every 100 ms; applies this tree's expand steps; replaces the
// replicas with two of this tree's; and applies the contract step.
func (b *bench) upgradePhase(ctx context.Context, o options) (*Upgrade, error) {
	dir, err := os.MkdirTemp("", "bench-upgrade-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if os.Getenv("BENCH_KEEP") == "" {
			_ = os.RemoveAll(dir)
		} else {
			b.log.Info("upgrade logs kept", slog.String("dir", dir))
		}
	}()
	prev := filepath.Join(dir, "poller-previous")
	if err := harness.BuildRelease(ctx, harness.PreviousRelease, "poller", prev); err != nil {
		return nil, err
	}
	const name = "bench_upgrade"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer dropDB(context.WithoutCancel(ctx), b.admin, name)
	if err := migrate(ctx, prev, dbURL); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dbURL+"&application_name=bench-upgrade")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	res := &Upgrade{Payments: o.upgradePayments, Hook: o.upgradeHook}
	if res.From, err = migrations.Current(ctx, conn); err != nil {
		return nil, err
	}
	b.log.Info("seeding the ledger", slog.Int("payments", o.upgradePayments))
	started := time.Now()
	if err := seedLedger(ctx, conn, o.upgradePayments); err != nil {
		return nil, fmt.Errorf("seeding: %w", err)
	}
	res.SeedSeconds = time.Since(started).Seconds()

	l, err := startLiveChain(ctx, nodeAnvil, o.anvil, nodeOptions{blockTime: time.Second, slots: 2}, 16)
	if err != nil {
		return nil, err
	}
	defer l.n.close()
	n, s, contracts, final := l.n, l.s, l.contracts, l.final
	burns := s.trickle(ctx, contracts, 100*time.Millisecond, b.log)
	defer burns.stop()

	start := func(bin, who string) (*replica, error) {
		addr, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		env := harness.PollerEnv(harness.Target{DatabaseURL: dbURL, RPCURL: n.url, ChainID: n.chainID, Contract: contracts.burn, HTTPAddr: addr.String()},
			"POLL_INTERVAL=1s", "MIGRATE=false", "START_BLOCK="+strconv.FormatUint(final+1, 10), "PAYMENT_HOOK_SQL="+o.upgradeHook)
		return startPoller(bin, []string{"run"}, env, dir, who, addr.String())
	}
	var replicas []*replica
	defer func() {
		for _, r := range replicas {
			_, _ = r.Stop(10 * time.Second)
		}
	}()
	for _, who := range []string{"previous-a", "previous-b"} {
		r, err := start(prev, who)
		if err != nil {
			return nil, err
		}
		replicas = append(replicas, r)
	}
	recorded := func() int {
		var c int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM payments WHERE chain_id = $1`, int64(n.chainID)).Scan(&c)
		return c
	}
	if err := harness.WaitFor(ctx, 2*time.Minute, "the previous release recording", func() bool { return recorded() > 0 }); err != nil {
		return nil, err
	}

	stopSampling := sampleWriterWaits(ctx, dbURL)
	before := recorded()
	var steps []UpgradeStep
	writers := "previous release"
	apply := func(c migrations.Contract) (*migrations.Result, error) {
		// Each migration starts while a writer is in the middle of a
		// range transaction (its payments inserted, the hook running):
		// the worst moment for the writers queued behind its locks.
		if err := harness.WaitFor(ctx, 2*time.Minute, "a writer in the middle of a range transaction", func() bool {
			var mid bool
			_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
				AND application_name LIKE 'burnpoller%' AND xact_start IS NOT NULL AND wait_event = 'PgSleep')`).Scan(&mid)
			return mid
		}); err != nil {
			return nil, err
		}
		mconn, err := pgx.Connect(ctx, dbURL+"&application_name=bench-migrate")
		if err != nil {
			return nil, err
		}
		defer mconn.Close(context.WithoutCancel(ctx))
		r, err := migrations.Apply(ctx, mconn, migrations.Latest(), migrations.Options{Contract: c, Release: "bench",
			Applied: func(v int32, name string, took time.Duration) {
				steps = append(steps, UpgradeStep{Version: v, Name: name, Writers: writers, TookMs: ms(took), end: time.Now()})
				b.log.Info("applied", slog.Int("version", int(v)), slog.String("name", name), slog.Duration("took", took))
			}})
		return &r, err
	}
	r, err := apply(migrations.ContractWhenFree)
	if err != nil {
		return nil, err
	}
	if r.Pending == nil {
		return nil, errors.New("the contract step ran beside the previous release's replicas")
	}
	// This tree's replicas take over; the old ones stop.
	writers = "this tree"
	for _, who := range []string{"new-a", "new-b"} {
		r, err := start(b.bin, who)
		if err != nil {
			return nil, err
		}
		replicas = append(replicas, r)
	}
	for _, p := range replicas[:2] {
		_ = p.Signal(syscall.SIGTERM)
		if _, err := p.Wait(30 * time.Second); err != nil {
			return nil, err
		}
	}
	// The contract step runs while this tree's replicas record.
	took := recorded()
	if err := harness.WaitFor(ctx, 2*time.Minute, "this tree's replicas recording", func() bool { return recorded() >= took+10 }); err != nil {
		return nil, err
	}
	if _, err := apply(migrations.ContractWait); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	all := stopSampling()
	res.Recorded = recorded() - before
	for i := range steps {
		// A step's window: its own duration, ending when Applied heard
		// of it, and half a second after (a writer queued behind it
		// resumes then).
		end := steps[i].end
		start := end.Add(-time.Duration(steps[i].TookMs * float64(time.Millisecond)))
		for _, smp := range all {
			if !smp.at.Before(start) && smp.at.Before(end.Add(500*time.Millisecond)) {
				steps[i].LongestWriterWaitMs = max(steps[i].LongestWriterWaitMs, ms(smp.wait))
			}
		}
	}
	for _, smp := range all {
		res.LongestWriterWaitMs = max(res.LongestWriterWaitMs, ms(smp.wait))
	}
	res.Steps = steps
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sampleWriterWaits samples, every 5 ms until stopped, the longest wait for
// a table lock among burnpoller's sessions on dbURL (the migrator's
// excluded); stop returns the samples.
func sampleWriterWaits(ctx context.Context, dbURL string) (stop func() []waitSample) { //nolint:contextcheck // the sampler's own context ends with stop
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []waitSample, 1)
	go func() {
		var out []waitSample
		defer func() { done <- out }()
		conn, err := pgx.Connect(ctx, dbURL+"&application_name=bench-sampler")
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var wait time.Duration
			if err := conn.QueryRow(ctx, `SELECT coalesce(max(clock_timestamp() - l.waitstart), '0')
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND l.locktype = 'relation' AND a.datname = current_database()
				  AND a.application_name LIKE 'burnpoller%'`).Scan(&wait); err == nil {
				out = append(out, waitSample{at: time.Now(), wait: wait})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []waitSample { cancel(); return <-done }
}

// seedLedger fills a ledger at the previous release's schema with n
// payments of chain 999 (apart from the replicas' chain), each with its
// confirmed event, numbered 1..n, and a delivered webhook of a removed
// endpoint, as a year of a busy service leaves them.
func seedLedger(ctx context.Context, conn *pgx.Conn, n int) error {
	for _, q := range []string{
		`INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		 SELECT 999, '0x00000000000000000000000000000000000000b0', '0x' || lpad(to_hex(g), 64, '0'), 0, g / 100,
		        '0x' || lpad(to_hex(g / 100), 64, '0'), '0x' || lpad(to_hex(g % 5000), 40, '0'),
		        '0x' || md5(g::text) || md5((-g)::text), g::numeric * 1000000, now() - interval '1 year' + g * interval '30 seconds'
		 FROM generate_series(1, $1::bigint) AS g`,
		`INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number, block_hash,
		        payer, digest, amount, burned_at, payment_id, history_hash)
		 SELECT id, 'seed:' || id, 'confirmed', chain_id, contract, tx_hash, log_index, block_number, block_hash,
		        payer, digest, amount, burned_at, id, sha256(id::text::bytea)
		 FROM payments`,
		`UPDATE payment_event_seq SET last_seq = (SELECT max(seq) FROM payment_events)`,
		`INSERT INTO webhook_endpoints (endpoint, events, enqueued_seq) VALUES ('https://seed.example', '{confirmed}', $1)`,
		`INSERT INTO webhook_deliveries (endpoint, seq, event_id, attempts, delivered_at, last_status)
		 SELECT 'https://seed.example', seq, event_id, 1, now(), 200 FROM payment_events`,
		`ANALYZE`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, int64(n))
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("%.60s…: %w", q, err)
		}
	}
	return nil
}
