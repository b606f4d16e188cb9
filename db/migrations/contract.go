package migrations

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

// Expand, then contract. A migration never breaks the previous release's
// writers, readers or consumers: it adds (tables, columns, indexes built
// concurrently) and leaves what that release names. A step that would break
// it (dropping or renaming what it names, tightening a constraint it can
// violate, changing what a trigger expects, refusing it) is a contract
// step, marked by the contractMarker line, and runs only once no replica of
// an older release lives (OlderReplicas), unless an operator forces it.

// contractMarker marks a contract step.
var contractMarker = regexp.MustCompile(`(?m)^---- burnpoller: contract ----$`)

// WriterSetting is the setting (SET LOCAL) with which a writer's
// transaction declares the schema its binary brings, Latest: a contract
// step refuses the writes of burnpoller sessions that declare less.
const WriterSetting = "burnpoller.writer_schema"

// legacySessions are the names burnpoller's sessions took before schema 25
// (application_name): a session so named is a replica, or a command, of a
// release older than any contract step.
var legacySessions = []string{"burnpoller", "burnpoller-session", "burnpoller-webhooks"}

// SessionName is the application_name of a burnpoller session of this
// binary: base (burnpoller, burnpoller-session, …) and the schema it
// brings, which a later release's contract step reads in pg_stat_activity.
func SessionName(base string) string {
	return base + "/" + strconv.Itoa(int(Latest()))
}

// liveFor is how recently a replica_members row must have been beaten for
// its replica to count as alive (replicas beat every 2 s at most).
const liveFor = "30 seconds"

// committedFor is how recently a release that declares no writer schema
// must have committed (release_sightings) to count as alive: its head
// tracking commits at every block, its ranges at every finality step.
const committedFor = "1 minute"

// OlderReplicas lists what lives of releases that bring a schema below
// version, in this database: the replicas whose replica_members row was
// beaten lately and names an older schema (or none: a release before
// schema 25, with GROUPS); the sessions whose application_name names one
// (a release before schema 25 names its sessions 'burnpoller',
// 'burnpoller-session' or 'burnpoller-webhooks'; later ones add
// '/<schema>'); and the commits, within committedFor, of burnpoller
// sessions that declared no writer schema (release_sightings), which show
// a writer whose session is gone for a moment (a reconnect) or renamed (a
// transaction pooler hands its server connection to the next client). A
// replica of an older release whose connection string names its sessions
// otherwise, that serves no named groups and has not written lately,
// cannot be seen.
func OlderReplicas(ctx context.Context, q Querier, version int32) ([]string, error) {
	var older []string
	var hasMembers, hasSchema bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('public.replica_members') IS NOT NULL,
		EXISTS (SELECT 1 FROM information_schema.columns
		        WHERE table_schema = 'public' AND table_name = 'replica_members' AND column_name = 'schema_version')`).
		Scan(&hasMembers, &hasSchema); err != nil {
		return nil, fmt.Errorf("looking for replicas of older releases: %w", err)
	}
	if hasMembers {
		sql := `SELECT array_agg('replica ' || id || ' (release before schema 25, serving groups)' ORDER BY id)
			FROM replica_members WHERE heartbeat_at > now() - interval '` + liveFor + `'`
		if hasSchema {
			sql = `SELECT array_agg('replica ' || id || ' (release ' || coalesce(release, 'before schema 25') ||
				coalesce(', schema ' || schema_version, '') || ')' ORDER BY id)
				FROM replica_members WHERE heartbeat_at > now() - interval '` + liveFor + `'
				AND (schema_version IS NULL OR schema_version < $1)`
		}
		var rows []string
		args := []any{}
		if hasSchema {
			args = append(args, version)
		}
		if err := q.QueryRow(ctx, sql, args...).Scan(&rows); err != nil {
			return nil, fmt.Errorf("reading replica_members: %w", err)
		}
		older = append(older, rows...)
	}
	var sessions []string
	if err := q.QueryRow(ctx, `SELECT array_agg('session ' || application_name || ' (pid ' || pid || ')' ORDER BY pid)
		FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND (application_name = ANY($1)
		       OR (application_name ~ '^burnpoller[a-z-]*/[0-9]{1,9}$'
		           AND split_part(application_name, '/', 2)::integer < $2))`,
		legacySessions, version).Scan(&sessions); err != nil {
		return nil, fmt.Errorf("reading the database's sessions: %w", err)
	}
	older = append(older, sessions...)
	var sighted *time.Time
	err := q.QueryRow(ctx, `SELECT max(last_commit_at) FROM release_sightings
		WHERE writer_schema < $1 AND last_commit_at > now() - interval '`+committedFor+`'`, version).Scan(&sighted)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // before migration 25
	case err != nil:
		return nil, fmt.Errorf("reading release_sightings: %w", err)
	case sighted != nil:
		older = append(older, "commits of a release before schema 26, the last at "+sighted.UTC().Format(time.RFC3339))
	}
	return older, nil
}

// Pending is a contract step left pending: replicas of older releases
// still live.
type Pending struct {
	Version int32
	Name    string
	Older   []string
}

func (p *Pending) String() string {
	if len(p.Older) == 0 {
		return fmt.Sprintf("contract step %d (%s) pending", p.Version, p.Name)
	}
	return fmt.Sprintf("contract step %d (%s) pending: what lives of older releases: %s",
		p.Version, p.Name, strings.Join(p.Older, ", "))
}

// isContract says migration m is a contract step.
func isContract(m *migrate.Migration) bool { return contractMarker.MatchString(m.UpSQL) }

// Compatible is the lowest schema version this binary runs against: Latest
// less the contract steps it ends with, which may wait for the previous
// release's replicas to go.
func Compatible() int32 {
	steps, err := load()
	if err != nil {
		panic(fmt.Sprintf("embedded migrations: %v", err))
	}
	v := int32(len(steps))
	for v > 0 && isContract(steps[v-1]) {
		v--
	}
	return v
}

// recordContract records, in tx, that the contract step to was applied by
// release, forced or not, and what of older releases lived then.
func recordContract(ctx context.Context, tx pgx.Tx, to int32, name, release string, older []string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO schema_contracts (version, name, release, forced, older)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (version) DO UPDATE SET name = excluded.name, release = excluded.release,
			forced = excluded.forced, older = excluded.older, applied_at = now()`,
		to, name, release, len(older) > 0, append([]string{}, older...)); err != nil {
		return fmt.Errorf("recording contract step %d: %w", to, err)
	}
	return nil
}

// Applied is a contract step the database has applied.
type Applied struct {
	Version int32
	Name    string
	Release string
	Forced  bool
	Older   []string
	At      time.Time
}

// Status is the schema's state: its version, the contract steps this
// binary has that the database has not applied, each with what of older
// releases lives, and those it has applied.
type Status struct {
	Version int32
	Pending []Pending
	Applied []Applied
}

// ReadStatus reads the schema's state; it only reads.
func ReadStatus(ctx context.Context, q Queryer) (Status, error) {
	v, err := Current(ctx, q)
	if err != nil {
		return Status{}, err
	}
	st := Status{Version: v}
	steps, err := load()
	if err != nil {
		return Status{}, err
	}
	for i := int(max(v, 0)); i < len(steps); i++ {
		if !isContract(steps[i]) {
			continue
		}
		older, err := OlderReplicas(ctx, q, int32(i+1))
		if err != nil {
			return Status{}, err
		}
		st.Pending = append(st.Pending, Pending{Version: int32(i + 1), Name: steps[i].Name, Older: older})
	}
	rows, err := q.Query(ctx, `SELECT version, name, release, forced, older, applied_at FROM schema_contracts ORDER BY version`)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return st, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading the contract steps applied: %w", err)
	}
	st.Applied, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Applied, error) {
		var a Applied
		err := r.Scan(&a.Version, &a.Name, &a.Release, &a.Forced, &a.Older, &a.At)
		return a, err
	})
	if err != nil {
		return Status{}, fmt.Errorf("reading the contract steps applied: %w", err)
	}
	return st, nil
}

// Queryer reads: a connection, pool or transaction.
type Queryer interface {
	Querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
