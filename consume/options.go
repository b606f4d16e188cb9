package consume

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/payments"
)

// Defaults of the options.
const (
	DefaultBatchSize    = 100
	DefaultBatchTimeout = 30 * time.Second
	DefaultPollInterval = 5 * time.Second
)

// MaxBatchSize is the largest BatchSize accepted.
const MaxBatchSize = 10000

// Option changes how Run, RunAtLeastOnce or a Follower read and hand over
// events. A Follower uses only BatchSize, the filters, PollInterval,
// ListenOn, NoListen and Logger.
type Option func(*config)

type config struct {
	batch        int
	batchTimeout time.Duration
	poll         time.Duration
	listen       *pgxpool.Pool
	noListen     bool
	owner        string // "" for the connecting role
	filter       filter
	start        int64 // -1: the last event at registration
	log          *slog.Logger
	progress     func(Progress)
	reg          prometheus.Registerer
	errs         []error
	// beforeCommit, if set, runs after the handlers of a batch and the
	// offset update, just before COMMIT (tests: a crash at that point).
	beforeCommit func(pgx.Tx)
}

// BatchSize is the most seqs one batch reads (and so the most events it
// holds in memory and hands over in one transaction); default
// DefaultBatchSize, at most MaxBatchSize.
func BatchSize(n int) Option {
	return func(c *config) {
		if n < 1 || n > MaxBatchSize {
			c.errs = append(c.errs, fmt.Errorf("BatchSize %d is not within 1..%d", n, MaxBatchSize))
		}
		c.batch = n
	}
}

// BatchTimeout bounds one batch: with Run, its transaction (the client's
// deadline and, on the server, statement_timeout and
// idle_in_transaction_session_timeout); with RunAtLeastOnce, the handlers'
// context. No new event is handed over once half of it has passed, so that
// what was handled can commit. Default DefaultBatchTimeout; at least 100ms.
func BatchTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < 100*time.Millisecond {
			c.errs = append(c.errs, fmt.Errorf("BatchTimeout %s is below 100ms", d))
		}
		c.batchTimeout = d
	}
}

// PollInterval is how often the table is read when no notification came;
// default DefaultPollInterval. A notification is only a wake-up, and none
// arrives while the listening session reconnects (or ever, through a
// transaction pooler).
func PollInterval(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond {
			c.errs = append(c.errs, fmt.Errorf("PollInterval %s is below 1ms", d))
		}
		c.poll = d
	}
}

// ListenOn takes the LISTEN session from pool instead of the consumer's own:
// give a pool that reaches Postgres itself when the consumer's goes through
// a transaction pooler, where notifications never arrive. The session is
// taken out of pool for as long as the consumer runs.
func ListenOn(pool *pgxpool.Pool) Option {
	return func(c *config) {
		if pool == nil {
			c.errs = append(c.errs, errors.New("ListenOn: nil pool (use NoListen to poll only)"))
		}
		c.listen = pool
	}
}

// NoListen makes the consumer find new events by polling only, every
// PollInterval.
func NoListen() Option { return func(c *config) { c.noListen = true } }

// Owner registers a name the consumer creates for role instead of the
// role it connects as: a group role its login roles are members of, so
// that a service whose login roles rotate (a new one per credential lease)
// keeps its names. Row-level security (migration 20) lets only members of
// a name's owner see and move its offset; the connecting role must be a
// member of role.
func Owner(role string) Option {
	return func(c *config) {
		if role == "" {
			c.errs = append(c.errs, errors.New("Owner: empty role name"))
		}
		c.owner = role
	}
}

// Kinds hands over only events of these kinds (payments.KindSeen,
// KindRetracted, KindConfirmed); the offset moves past the others.
func Kinds(kinds ...string) Option {
	return func(c *config) {
		for _, k := range kinds {
			if !slices.Contains(payments.Kinds, k) {
				c.errs = append(c.errs, fmt.Errorf("Kinds: %q is not one of %s", k, strings.Join(payments.Kinds, ", ")))
			}
		}
		c.filter.kinds = append(c.filter.kinds, kinds...)
		if c.filter.kinds == nil {
			c.filter.kinds = []string{} // Kinds() hands over nothing
		}
	}
}

// Chains hands over only events of these chain ids; the offset moves past
// the others.
func Chains(ids ...uint64) Option {
	return func(c *config) {
		for _, id := range ids {
			if id == 0 || id > math.MaxInt64 {
				c.errs = append(c.errs, fmt.Errorf("Chains: %d is not a chain id", id))
			}
			c.filter.chains = append(c.filter.chains, int64(id))
		}
		if c.filter.chains == nil {
			c.filter.chains = []int64{}
		}
	}
}

var addressRE = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)

// Contracts hands over only events of these burn contracts (0x-prefixed
// hex, any case); the offset moves past the others.
func Contracts(addrs ...string) Option {
	return func(c *config) {
		for _, a := range addrs {
			if !addressRE.MatchString(a) {
				c.errs = append(c.errs, fmt.Errorf("Contracts: %q is not a 0x-prefixed 20-byte hex address", a))
			}
			c.filter.contracts = append(c.filter.contracts, strings.ToLower(a))
		}
		if c.filter.contracts == nil {
			c.filter.contracts = []string{}
		}
	}
}

// StartAfter makes a consumer whose name has no offset yet start after
// event seq (0, the default: from the first event). It has no effect once
// the name has an offset.
func StartAfter(seq int64) Option {
	return func(c *config) {
		if seq < 0 {
			c.errs = append(c.errs, fmt.Errorf("StartAfter %d is negative", seq))
		}
		c.start = seq
	}
}

// StartAtEnd makes a consumer whose name has no offset yet start after the
// last event committed when it first runs: it is handed only the events
// committed from then on. It has no effect once the name has an offset.
func StartAtEnd() Option { return func(c *config) { c.start = -1 } }

// Logger receives the consumer's warnings (a failed batch and its retry)
// and debug lines; by default they are dropped.
func Logger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.errs = append(c.errs, errors.New("Logger: nil logger"))
		}
		c.log = l
	}
}

// OnProgress calls f after each batch committed and each read that found
// nothing new, from the consumer's goroutine (a slow f slows the consumer).
func OnProgress(f func(Progress)) Option { return func(c *config) { c.progress = f } }

// Metrics registers the consumer's collectors on reg, labelled with the
// consumer's name (see the package doc). Registering two consumers of the
// same name on one registry fails.
func Metrics(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

func newConfig(opts []Option) (config, error) {
	c := config{
		batch:        DefaultBatchSize,
		batchTimeout: DefaultBatchTimeout,
		poll:         DefaultPollInterval,
		log:          slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&c)
	}
	if len(c.errs) > 0 {
		return c, fmt.Errorf("consume: %w", errors.Join(c.errs...))
	}
	return c, nil
}
