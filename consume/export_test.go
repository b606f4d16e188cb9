package consume

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// BeforeCommit runs f in each batch of Run after the handlers and the
// offset update, just before COMMIT: where a crash must leave nothing.
func BeforeCommit(f func(pgx.Tx)) Option { return func(c *config) { c.beforeCommit = f } }

// SetResetIdleTimeout sets how long Reset's transaction may sit idle on
// the server, until the returned func restores it. Only for a test that
// does not run in parallel.
func SetResetIdleTimeout(d time.Duration) (restore func()) {
	old := resetIdleTimeout
	resetIdleTimeout = d
	return func() { resetIdleTimeout = old }
}
