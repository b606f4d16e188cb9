// Package spread spreads the groups of replica sets that serve several
// (GROUPS) over their live replicas. Each replica keeps a membership row in
// Postgres (replica_members) that it beats and that names the groups it
// serves; every replica reads the live rows and computes the same
// preferred holder of each group (Assign: rendezvous hashing capped at
// ⌈groups / replicas⌉ each). The preference is advice: the cursor lock
// still decides who writes, a replica that is not a group's preferred
// holder takes the group over as soon as its holder stops reading it
// (poller.Loop), and a replica that cannot beat its row prefers nothing
// (every replica then works as a replica of one group does).
package spread

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/testsignal"
	"github.com/burnpoller/burnpoller/poller"
)

// Config is a replica's membership.
type Config struct {
	// Beat is how often the replica beats its row and reads the others';
	// a row not beaten for TTL is a replica gone.
	Beat time.Duration
	TTL  time.Duration
	// Release and Schema are the release the replica runs and the schema
	// version its binary brings, written in its row: a contract step waits
	// while a live row names an older schema (migrations.OlderReplicas).
	Release string
	Schema  int32
}

// ForPollInterval is the membership of a replica whose groups poll at
// least every interval: a beat as often as the quickest group looks at its
// chain (from 250 ms to 2 s), a replica gone after four beats missed.
func ForPollInterval(interval time.Duration) Config {
	beat := min(max(interval, 250*time.Millisecond), 2*time.Second)
	return Config{Beat: beat, TTL: 4 * beat}
}

// gcAfter is how long a row not beaten stays before a replica removes it.
const gcAfter = 24 * time.Hour

// Members is this replica's membership and its view of the others'. It is
// safe for concurrent use; Start and Stop follow the usual lifecycle.
type Members struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	id   string

	mu     sync.Mutex
	groups map[string]func() bool // cursor id -> serving it now
	// assignment is the preferred holder of each group as last read, at
	// (local clock) when it was read; zero while no beat succeeded.
	assignment map[string]string
	at         time.Time
	live       int

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once

	// Assigned tells a test that a beat read the members and assigned
	// the groups.
	Assigned testsignal.Signal[map[string]string]
}

// New returns this replica's membership, with an id of its own (host,
// process id and a random part); nothing runs until Start.
func New(pool *pgxpool.Pool, cfg Config, log *slog.Logger) *Members {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &Members{pool: pool, cfg: cfg, log: log, id: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b)),
		groups: map[string]func() bool{}}
}

// ID is this replica's id in replica_members.
func (m *Members) ID() string { return m.id }

// Serve adds the group of cursor id to what this replica serves, listed
// while serving says so (a group whose loop latched or keeps failing is
// left out, so that the others take it), and returns its view of the
// group's preferred holder.
func (m *Members) Serve(cursorID string, serving func() bool) poller.Holder {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups[cursorID] = serving
	return holder{m: m, group: cursorID}
}

// Start beats the row in the background until Stop; it returns at once.
func (m *Members) Start(ctx context.Context) error {
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		m.run(ctx)
	}()
	return nil
}

// Stop ends the beats; it blocks until done, and is safe to call twice or
// without Start.
func (m *Members) Stop() {
	m.stopOnce.Do(func() {
		if m.cancel == nil {
			return
		}
		m.cancel()
		<-m.done
	})
}

// run beats until ctx ends, then removes the row at once, so that the
// others take this replica's groups at their next beat (a replica being
// stopped drains its transactions meanwhile) rather than after TTL.
func (m *Members) run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Beat)
	defer t.Stop()
	for {
		if err := m.beat(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("beating the replica's membership row", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			m.leave(context.WithoutCancel(ctx))
			return
		case <-t.C:
		}
	}
}

// leave removes this replica's row.
func (m *Members) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := m.pool.Exec(ctx, `DELETE FROM replica_members WHERE id = $1`, m.id); err != nil {
		m.log.Warn("removing this replica's membership row; the others take its groups once it expires", slog.Any("err", err))
	}
}

// beat writes this replica's row and reads every live one, in statements
// of their own, each bounded by a beat.
func (m *Members) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Beat)
	defer cancel()
	started := time.Now()
	serving := m.serving()
	if _, err := m.pool.Exec(ctx, `
		INSERT INTO replica_members (id, groups, release, schema_version) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET groups = excluded.groups, release = excluded.release,
			schema_version = excluded.schema_version, heartbeat_at = now()`,
		m.id, serving, m.cfg.Release, m.cfg.Schema); err != nil {
		return fmt.Errorf("beating: %w", err)
	}
	// Replicas that serve no named group (their row only says which
	// release they run) take no share.
	rows, err := m.pool.Query(ctx, `SELECT id, groups FROM replica_members
		WHERE heartbeat_at > now() - $1::interval AND cardinality(groups) > 0 ORDER BY id`, m.cfg.TTL)
	if err != nil {
		return fmt.Errorf("reading the members: %w", err)
	}
	members, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var mem Member
		err := r.Scan(&mem.ID, &mem.Groups)
		return mem, err
	})
	if err != nil {
		return fmt.Errorf("reading the members: %w", err)
	}
	a := Assign(members)
	m.mu.Lock()
	m.assignment, m.at, m.live = a, started, len(members)
	m.mu.Unlock()
	m.Assigned.Send(a)
	if _, err := m.pool.Exec(ctx, `DELETE FROM replica_members WHERE heartbeat_at < now() - $1::interval`, gcAfter); err != nil {
		return fmt.Errorf("removing the rows of replicas long gone: %w", err)
	}
	return nil
}

// serving are the groups this replica serves now, sorted.
func (m *Members) serving() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for id, ok := range m.groups {
		if ok() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// preferred is the group's preferred holder as last read, "" when no beat
// succeeded within TTL (this replica may be cut off: it prefers nothing).
func (m *Members) preferred(group string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() || time.Since(m.at) > m.cfg.TTL {
		return ""
	}
	return m.assignment[group]
}

// Holding are the groups this replica is the preferred holder of, as last
// read, and how many replicas were live.
func (m *Members) Holding() (groups []string, live int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for g, r := range m.assignment {
		if r == m.id {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	return groups, m.live
}

// holder is one group's view of its preferred holder (poller.Holder).
type holder struct {
	m     *Members
	group string
}

// Preferred says whether this replica is the group's preferred holder as
// last read; known is false while no beat succeeded within TTL.
func (h holder) Preferred() (this, known bool) {
	p := h.m.preferred(h.group)
	return p == h.m.id, p != ""
}
