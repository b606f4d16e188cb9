package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/webhooks"
)

// Config is every environment variable burnpoller reads. The names are an
// interface: other tools drive the binary through them. The fields tagged
// group are a group's: without GROUPS, the process's one group reads them
// as they are; with GROUPS, each group reads them under its prefix
// (ETH_RPC_URL), those tagged shared falling back to the unprefixed
// variable (envconfig's own prefix mechanism), those tagged own never.
type Config struct {
	DatabaseURL          string        `envconfig:"DATABASE_URL" secret:"true" desc:"Postgres connection string (URL or key=value); required"`
	DatabaseDirectURL    string        `envconfig:"DATABASE_DIRECT_URL" secret:"true" desc:"connection string that reaches Postgres itself, not through a transaction pooler, for what needs a session: migrations (a session lock) and LISTEN (events --follow, tail, webhook wake-ups); default DATABASE_URL"`
	DatabaseExecMode     string        `envconfig:"DATABASE_EXEC_MODE" default:"cache_describe" desc:"how statements are sent (pgx's exec modes): cache_describe (unnamed statements, descriptions cached: works through PgBouncer in transaction mode, any version, and direct), cache_statement (named prepared statements: direct, or PgBouncer >= 1.21 with max_prepared_statements set), describe_exec, exec or simple_protocol"`
	DatabaseMaxConns     int32         `envconfig:"DATABASE_MAX_CONNS" default:"4" derived:"4; with GROUPS, 2 × groups + 2 for the ledger's" desc:"most connections each pool of a process opens (1 to 100): the ledger's, and the webhook deliveries' when WEBHOOK_URL is set; with GROUPS at least 2 per group + 2, so that no group can take a connection another needs (unset, the ledger's is that and the webhook deliveries' stays 4)"`
	GroupNames           string        `envconfig:"GROUPS" desc:"names of the groups this process serves, comma-separated (eth,base): each reads its variables under its name as a prefix (ETH_RPC_URL, BASE_CHAIN_ID), and the replicas share the groups' work; unset, the unprefixed variables are the one group, as before"`
	RPCURL               string        `envconfig:"RPC_URL" group:"own" secret:"true" desc:"JSON-RPC endpoints of the chain (http, https, ws, wss), comma-separated in order of preference; required"`
	RPCWSURL             string        `envconfig:"RPC_WS_URL" group:"own" secret:"true" desc:"optional WebSocket endpoint (ws, wss) for newHeads: a new head ends the wait after reaching the target at once; polling goes on if it drops"`
	ChainID              uint64        `envconfig:"CHAIN_ID" group:"own" desc:"chain id the node must report; required"`
	BurnContract         string        `envconfig:"BURN_CONTRACT" group:"own" desc:"address of the BurnWithDigest contract, or several comma-separated, each optionally with @<first block> (0xA,0xB@19000000); the first names the group; required"`
	StartBlock           int64         `envconfig:"START_BLOCK" group:"own" default:"0" desc:"first block to scan when the cursor does not exist yet"`
	CursorID             string        `envconfig:"CURSOR_ID" group:"own" desc:"cursor row shared by the replicas of one group (default <chain id>:<contract>)"`
	Finality             string        `envconfig:"FINALITY" group:"shared" default:"finalized" chain:"true" desc:"target block: finalized, safe, or latest minus CONFIRMATIONS (a well-known CHAIN_ID has its own default)"`
	Confirmations        uint64        `envconfig:"CONFIRMATIONS" group:"shared" default:"12" chain:"true" desc:"blocks behind the head when FINALITY=latest (ignored otherwise)"`
	PollInterval         time.Duration `envconfig:"POLL_INTERVAL" group:"shared" default:"2s" desc:"once at the target, how often the chain is looked at again (from the start of the last look)"`
	MaxBlockRange        uint64        `envconfig:"MAX_BLOCK_RANGE" group:"shared" default:"2000" chain:"true" desc:"blocks per eth_getLogs call: unset, the first size, which grows up to 100000 on sparse chains while replies are small and fast and shrinks to what the provider accepts; set, also the most ever asked (a well-known CHAIN_ID has its own first size)"`
	VerifyReceipts       bool          `envconfig:"VERIFY_RECEIPTS" group:"shared" default:"true" desc:"confirm every burn in its transaction's receipt (eth_getBlockReceipts) before it is credited"`
	RPCQuorum            int           `envconfig:"RPC_QUORUM" group:"shared" default:"1" desc:"how many distinct RPC_URL endpoints must give the same target and burns before a range is credited"`
	RPCComputeUnits      string        `envconfig:"RPC_COMPUTE_UNITS" group:"shared" default:"eth_blockNumber=10,eth_chainId=10,eth_getBlockByNumber=16,eth_getBlockByHash=21,eth_getLogs=75,eth_getTransactionReceipt=15,eth_getBlockReceipts=500" desc:"what the provider bills a call of each method (compute units), method=units comma-separated: weighs burnpoller_rpc_compute_units_total, and chooses a block's receipts one transaction at a time when that costs less; a method left out weighs 0 (default: Alchemy's table)"`
	LockWait             time.Duration `envconfig:"LOCK_WAIT" group:"shared" derived:"min(5s, TX_TIMEOUT/6)" desc:"how long a standby replica waits for the cursor lock before retrying (lock_timeout); below TX_TIMEOUT"`
	TxTimeout            time.Duration `envconfig:"TX_TIMEOUT" group:"shared" default:"30s" desc:"bound of one range's transaction, enforced by Postgres (statement and idle-in-transaction timeouts)"`
	RPCTimeout           time.Duration `envconfig:"RPC_TIMEOUT" group:"shared" derived:"min(10s, TX_TIMEOUT/3)" desc:"bound of one JSON-RPC request; at most TX_TIMEOUT"`
	RescanDepth          int64         `envconfig:"RESCAN_DEPTH" group:"shared" default:"64" desc:"committed blocks below the cursor re-read now and then to catch burns a node left out (0 disables)"`
	RescanInterval       time.Duration `envconfig:"RESCAN_INTERVAL" group:"shared" default:"1m" desc:"least time between rescans"`
	HTTPAddr             string        `envconfig:"HTTP_ADDR" default:":8080" desc:"listen address for /livez, /readyz and /metrics"`
	ShutdownTimeout      time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"15s" desc:"time after SIGTERM for the in-flight transaction and the HTTP server to finish"`
	LogLevel             string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat            string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	Migrate              bool          `envconfig:"MIGRATE" default:"true" desc:"apply database migrations at start"`
	Pending              bool          `envconfig:"PENDING" group:"shared" default:"true" desc:"track burns between the finality target and the head: pending_payments and seen/retracted events (never a credit)"`
	PendingMaxBlocks     int64         `envconfig:"PENDING_MAX_BLOCKS" group:"shared" default:"10000" desc:"most blocks above the finality target that head tracking reads"`
	WebhookURL           string        `envconfig:"WEBHOOK_URL" secret:"true" desc:"endpoints (http, https) that receive payment events as signed POSTs, comma-separated; every replica delivers"`
	WebhookSecret        string        `envconfig:"WEBHOOK_SECRET" secret:"true" desc:"HMAC-SHA256 key of the Burnpoller-Signature header; required with WEBHOOK_URL"`
	WebhookEvents        string        `envconfig:"WEBHOOK_EVENTS" default:"confirmed" desc:"event kinds delivered: any of seen,retracted,confirmed"`
	WebhookTimeout       time.Duration `envconfig:"WEBHOOK_TIMEOUT" default:"10s" desc:"bound of one delivery attempt"`
	WebhookMaxAge        time.Duration `envconfig:"WEBHOOK_MAX_AGE" default:"72h" desc:"how long a delivery is retried (jittered back-off, 1s to 1h) before it is dead-lettered"`
	AllowContractRemoval bool          `envconfig:"ALLOW_CONTRACT_REMOVAL" group:"shared" default:"false" desc:"let this replica stop the group following a contract its BURN_CONTRACT no longer lists (otherwise such a replica refuses to write: it may be one with an older configuration)"`
	AllowHookChange      bool          `envconfig:"ALLOW_HOOK_CHANGE" group:"shared" default:"false" desc:"make this replica's PAYMENT_HOOK_SQL the group's hook when it differs from the one the group recorded (otherwise such a replica refuses to start, and running ones with another hook stop writing)"`
	// lockWaitSet and rpcTimeoutSet say the user set LOCK_WAIT and
	// RPC_TIMEOUT; otherwise they were derived from TX_TIMEOUT.
	lockWaitSet, rpcTimeoutSet bool `ignored:"true"`
	// maxBlockRangeSet says the user set MAX_BLOCK_RANGE: a hard cap, not
	// a first size that grows.
	maxBlockRangeSet bool `ignored:"true"`
	// maxConnsSet says the user set DATABASE_MAX_CONNS; otherwise, with
	// GROUPS, it is derived from the number of groups.
	maxConnsSet bool `ignored:"true"`
	// fromChain names the chain whose table gave the variables (by key)
	// the user did not set.
	fromChain map[string]chain.Defaults `ignored:"true"`

	PaymentHookSQL string `envconfig:"PAYMENT_HOOK_SQL" group:"shared" secret:"true" desc:"SQL run in the same transaction for each newly inserted payment ($1 id, $2 chain_id, $3 contract, $4 tx_hash, $5 log_index, $6 block_number, $7 block_hash, $8 payer, $9 digest, $10 amount, $11 burned_at)"`
}

// Scope says which variables a subcommand needs.
type Scope int

// The scopes of the subcommands.
const (
	ScopeRun     Scope = iota // everything
	ScopeMigrate              // the database and logging only
	ScopeServe                // everything, and what serving every group at once needs (poller run)
)

// Set is a process's configuration: its own variables and each group's.
type Set struct {
	// Config holds the process's variables (the database, HTTP, logging,
	// webhooks); without GROUPS, the one group's too.
	Config
	// Groups are the groups the process serves, in GROUPS order; without
	// GROUPS, one group with no name whose Config is the process's.
	Groups []Group
	// Warnings name variables that look like a mistake but are not one
	// the process can refuse (a misspelt group variable is unknown, not
	// bad): the binary logs them at start.
	Warnings []string
}

// Named says whether the groups come from GROUPS.
func (s Set) Named() bool { return s.GroupNames != "" }

// Group returns the group called name, and false if there is none.
func (s Set) Group(name string) (Group, bool) {
	for _, g := range s.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return Group{}, false
}

// Group is one group's configuration: the process's variables, and the
// group's own read under its prefix.
type Group struct {
	// Name is the group's name in GROUPS (lower case), "" without GROUPS.
	Name string
	Config
}

// Var is the variable that holds key for this group: ETH_RPC_URL for
// group eth, RPC_URL without GROUPS.
func (g Group) Var(key string) string {
	if g.Name == "" {
		return key
	}
	return prefix(g.Name) + "_" + key
}

// prefix is the prefix of group name's variables.
func prefix(name string) string { return strings.ToUpper(name) }

// Database is where and how the process's pools connect.
func (c *Config) Database() database.Options {
	return database.Options{URL: c.DatabaseURL, DirectURL: c.DatabaseDirectURL, ExecMode: c.DatabaseExecMode, MaxConns: c.DatabaseMaxConns}
}

// WebhookDatabase is where and how the webhook deliveries' pool connects:
// as Database, but with GROUPS and no DATABASE_MAX_CONNS set, the 4
// connections its deliveries need whatever the number of groups.
func (c *Config) WebhookDatabase() database.Options {
	o := c.Database()
	if c.GroupNames != "" && !c.maxConnsSet {
		o.MaxConns = min(o.MaxConns, defaultMaxConns)
	}
	return o
}

// defaultMaxConns is DATABASE_MAX_CONNS's default without GROUPS.
const defaultMaxConns = 4

// GroupCursor is CURSOR_ID or, by default, "<chain id>:<first contract>": a
// group that follows one contract keeps its cursor when more are added
// after it.
func (c *Config) GroupCursor() string {
	if c.CursorID != "" {
		return c.CursorID
	}
	cs, err := poller.ParseContracts(c.BurnContract, checkAddress)
	if err != nil {
		return "" // not validated: no group
	}
	return fmt.Sprintf("%d:%s", c.ChainID, strings.ToLower(cs[0].Address.Hex()))
}

// Contracts are BURN_CONTRACT's contracts; call only after validation.
func (c *Config) Contracts() []poller.Contract {
	cs, err := poller.ParseContracts(c.BurnContract, checkAddress)
	if err != nil {
		panic(fmt.Sprintf("BURN_CONTRACT not validated: %v", err))
	}
	return cs
}

// CheckedContracts are BURN_CONTRACT's contracts, or why they are not (for
// a command that did not validate the group: ScopeMigrate).
func (c *Config) CheckedContracts() ([]poller.Contract, error) {
	return poller.ParseContracts(c.BurnContract, checkAddress)
}

// ComputeUnits is RPC_COMPUTE_UNITS as a table: method=units pairs, the
// units a number >= 0.
func (c *Config) ComputeUnits() (chain.Weights, error) {
	w := chain.Weights{}
	for _, kv := range strings.Split(c.RPCComputeUnits, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		method, units, ok := strings.Cut(kv, "=")
		v, err := strconv.ParseFloat(strings.TrimSpace(units), 64)
		if !ok || strings.TrimSpace(method) == "" || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%q is not method=units with units a number >= 0", kv)
		}
		w[strings.TrimSpace(method)] = v
	}
	return w, nil
}

// RPCURLs splits RPC_URL into its endpoints.
func (c *Config) RPCURLs() []string {
	var out []string
	for _, u := range strings.Split(c.RPCURL, ",") {
		out = append(out, strings.TrimSpace(u))
	}
	return out
}

// rangeGrowTo is the most blocks eth_getLogs ranges grow to on sparse
// chains when MAX_BLOCK_RANGE is unset: 50 times the default first size,
// hours to days of chain, and within what nodes without a cap answer fast.
const rangeGrowTo = 100_000

// MaxRange is the most blocks one eth_getLogs call may ask for: the
// user's MAX_BLOCK_RANGE, or, when unset, rangeGrowTo (ranges start at the
// default and grow).
func (c Config) MaxRange() uint64 {
	if c.maxBlockRangeSet {
		return c.MaxBlockRange
	}
	return max(c.MaxBlockRange, rangeGrowTo)
}

// WebhookConfig is the dispatcher's configuration; ok is false without
// WEBHOOK_URL. Call after validation.
func (c *Config) WebhookConfig() (webhooks.Config, bool) {
	if c.WebhookURL == "" {
		return webhooks.Config{}, false
	}
	eps, _ := webhooks.ParseEndpoints(c.WebhookURL)
	events, _ := webhooks.ParseEvents(c.WebhookEvents)
	return webhooks.Config{Endpoints: eps, Secret: c.WebhookSecret, Events: events,
		Timeout: c.WebhookTimeout, MaxAge: c.WebhookMaxAge}, true
}

func checkRPCURL(raw string) error {
	if raw == "" {
		return errors.New("empty")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not a URL with a host")
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
		return nil
	}
	return fmt.Errorf("scheme %q is not http, https, ws or wss", u.Scheme)
}

func checkAddress(s string) error {
	if !common.IsHexAddress(s) || !strings.HasPrefix(s, "0x") {
		return fmt.Errorf("%q is not a 0x-prefixed 20-byte hex address", s)
	}
	hexPart := s[2:]
	// Mixed case claims an EIP-55 checksum; a wrong one is a typo.
	if hexPart != strings.ToLower(hexPart) && hexPart != strings.ToUpper(hexPart) &&
		common.HexToAddress(s).Hex() != s {
		return fmt.Errorf("%q fails its EIP-55 checksum", s)
	}
	if common.HexToAddress(s) == (common.Address{}) {
		return errors.New("the zero address is not a contract")
	}
	return nil
}

func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has no valid port", addr)
	}
	return nil
}
