package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/webhooks"
)

var cursorIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._/-]{0,199}$`)

// validate checks ranges and relations and returns every problem, in the
// order of the variables without GROUPS.
func (c *Config) validate(s Scope) []string {
	p := c.validateDatabase()
	if s == ScopeMigrate {
		return p
	}
	p = append(p, c.validateChain()...)
	p = append(p, c.validateBlocks()...)
	p = append(p, c.validateWebhooks()...)
	p = append(p, c.validateTimeouts()...)
	return append(p, c.validateService()...)
}

// validateProcess checks the process's own variables (with GROUPS, the
// groups' are checked each on its own: validateGroup).
func (c *Config) validateProcess(s Scope) []string {
	p := c.validateDatabase()
	if s == ScopeMigrate {
		return p
	}
	p = append(p, c.validateWebhooks()...)
	return append(p, c.validateService()...)
}

// validateGroup checks a group's variables.
func (c *Config) validateGroup() []string {
	p := c.validateChain()
	p = append(p, c.validateBlocks()...)
	return append(p, c.validateTimeouts()...)
}

// problems collects problem lines.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// validateDatabase checks what every command needs: the database and the
// logging.
func (c *Config) validateDatabase() []string {
	var p problems
	if c.DatabaseURL == "" {
		p.add("DATABASE_URL: required (e.g. postgres://user:password@host:5432/db)")
	} else if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
		p.add("DATABASE_URL: not a valid Postgres connection string%s", database.ParseProblem(err))
	}
	if c.DatabaseDirectURL != "" {
		if _, err := pgconn.ParseConfig(c.DatabaseDirectURL); err != nil {
			p.add("DATABASE_DIRECT_URL: not a valid Postgres connection string%s", database.ParseProblem(err))
		}
	}
	if !database.ValidExecMode(c.DatabaseExecMode) {
		p.add("DATABASE_EXEC_MODE: %q is not one of %s", c.DatabaseExecMode, strings.Join(database.ExecModes, ", "))
	}
	if c.DatabaseMaxConns < 1 || c.DatabaseMaxConns > 100 {
		p.add("DATABASE_MAX_CONNS: %d is not between 1 and 100", c.DatabaseMaxConns)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		p.add("LOG_LEVEL: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	if !slices.Contains([]string{"json", "text"}, c.LogFormat) {
		p.add("LOG_FORMAT: %q is not one of json, text", c.LogFormat)
	}
	return p
}

// validateChain checks the node, the chain and the contracts.
func (c *Config) validateChain() []string {
	var p problems
	if c.RPCURL == "" {
		p.add("RPC_URL: required (e.g. https://node.example:8545, or several separated by commas)")
	} else {
		for i, u := range c.RPCURLs() {
			if err := checkRPCURL(u); err != nil {
				p.add("RPC_URL: endpoint %d: %v", i+1, err)
				break
			}
		}
	}
	if c.RPCWSURL != "" {
		if err := checkRPCURL(c.RPCWSURL); err != nil {
			p.add("RPC_WS_URL: %v", err)
		} else if u, _ := url.Parse(c.RPCWSURL); u.Scheme != "ws" && u.Scheme != "wss" {
			p.add("RPC_WS_URL: scheme %q is not ws or wss", u.Scheme)
		}
	}
	if c.ChainID == 0 {
		p.add("CHAIN_ID: required, a positive chain id")
	} else if c.ChainID > math.MaxInt64 {
		p.add("CHAIN_ID: %d is out of range", c.ChainID)
	}
	if c.BurnContract == "" {
		p.add("BURN_CONTRACT: required, the contract's 0x address")
	} else if _, err := poller.ParseContracts(c.BurnContract, checkAddress); err != nil {
		p.add("BURN_CONTRACT: %v", err)
	}
	if _, err := c.ComputeUnits(); err != nil {
		p.add("RPC_COMPUTE_UNITS: %v", err)
	}
	if n := len(c.RPCURLs()); c.RPCQuorum < 1 || (c.RPCURL != "" && c.RPCQuorum > n) {
		p.add("RPC_QUORUM: %d is not between 1 and the number of RPC_URL endpoints (%d)", c.RPCQuorum, n)
	}
	if c.CursorID != "" && !cursorIDPattern.MatchString(c.CursorID) {
		p.add("CURSOR_ID: %q must be 1-200 characters of letters, digits and :._/-", c.CursorID)
	}
	switch chain.Finality(c.Finality) {
	case chain.FinalityFinalized, chain.FinalitySafe, chain.FinalityLatest:
	default:
		p.add("FINALITY: %q is not one of finalized, safe, latest", c.Finality)
	}
	return p
}

// validateBlocks checks where a group starts and how many blocks it reads
// at once.
func (c *Config) validateBlocks() []string {
	var p problems
	if c.StartBlock < 0 || c.StartBlock > chain.MaxBlock {
		p.add("START_BLOCK: %d is out of range", c.StartBlock)
	}
	if c.Confirmations > 100_000 {
		p.add("CONFIRMATIONS: %d is more than 100000", c.Confirmations)
	}
	if c.PendingMaxBlocks < 1 || c.PendingMaxBlocks > 1_000_000 {
		p.add("PENDING_MAX_BLOCKS: %d is not between 1 and 1000000", c.PendingMaxBlocks)
	}
	if c.MaxBlockRange < 1 || c.MaxBlockRange > 1_000_000 {
		p.add("MAX_BLOCK_RANGE: %d is not between 1 and 1000000", c.MaxBlockRange)
	}
	if c.RescanDepth < 0 || c.RescanDepth > 100_000 {
		p.add("RESCAN_DEPTH: %d is not between 0 and 100000", c.RescanDepth)
	}
	return p
}

// validateTimeouts checks TX_TIMEOUT and what must fit under it. LOCK_WAIT
// and RPC_TIMEOUT are checked only when the user set them: derived from a
// valid TX_TIMEOUT they always fit under it, and derived from an invalid
// one they would only repeat the TX_TIMEOUT problem.
func (c *Config) validateTimeouts() []string {
	var p problems
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Hour {
		p.add("POLL_INTERVAL: %s is not between 10ms and 1h", c.PollInterval)
	}
	txValid := c.TxTimeout >= 100*time.Millisecond && c.TxTimeout <= time.Hour
	if !txValid {
		p.add("TX_TIMEOUT: %s is not between 100ms and 1h", c.TxTimeout)
	}
	if c.lockWaitSet {
		if c.LockWait < 10*time.Millisecond {
			p.add("LOCK_WAIT: %s is less than 10ms", c.LockWait)
		} else if txValid && c.LockWait >= c.TxTimeout {
			p.add("LOCK_WAIT: %s must be less than TX_TIMEOUT (%s)", c.LockWait, c.TxTimeout)
		}
	}
	if c.rpcTimeoutSet {
		if c.RPCTimeout < 10*time.Millisecond {
			p.add("RPC_TIMEOUT: %s is less than 10ms", c.RPCTimeout)
		} else if txValid && c.RPCTimeout > c.TxTimeout {
			p.add("RPC_TIMEOUT: %s must not exceed TX_TIMEOUT (%s)", c.RPCTimeout, c.TxTimeout)
		}
	}
	if c.RescanInterval < time.Second || c.RescanInterval > 24*time.Hour {
		p.add("RESCAN_INTERVAL: %s is not between 1s and 24h", c.RescanInterval)
	}
	return p
}

// validateService checks the process's own settings.
func (c *Config) validateService() []string {
	var p problems
	if err := checkListenAddr(c.HTTPAddr); err != nil {
		p.add("HTTP_ADDR: %v", err)
	}
	if c.ShutdownTimeout < 100*time.Millisecond || c.ShutdownTimeout > 10*time.Minute {
		p.add("SHUTDOWN_TIMEOUT: %s is not between 100ms and 10m", c.ShutdownTimeout)
	}
	return p
}

// validateWebhooks checks the WEBHOOK_ variables; no line quotes a URL or
// the secret.
func (c *Config) validateWebhooks() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if c.WebhookURL != "" {
		if _, err := webhooks.ParseEndpoints(c.WebhookURL); err != nil {
			add("WEBHOOK_URL: %v", err)
		}
		if c.WebhookSecret == "" {
			add("WEBHOOK_SECRET: required with WEBHOOK_URL (receivers verify the signature with it)")
		}
	}
	if c.WebhookSecret != "" && len(c.WebhookSecret) < 16 {
		add("WEBHOOK_SECRET: at least 16 characters")
	}
	if _, err := webhooks.ParseEvents(c.WebhookEvents); err != nil {
		add("WEBHOOK_EVENTS: %v", err)
	}
	if c.WebhookTimeout < 100*time.Millisecond || c.WebhookTimeout > 5*time.Minute {
		add("WEBHOOK_TIMEOUT: %s is not between 100ms and 5m", c.WebhookTimeout)
	}
	if c.WebhookMaxAge < time.Second || c.WebhookMaxAge > 90*24*time.Hour {
		add("WEBHOOK_MAX_AGE: %s is not between 1s and 2160h (90 days)", c.WebhookMaxAge)
	}
	return p
}
