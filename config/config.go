package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/kelseyhightower/envconfig"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/webhooks"
)

// Config is every environment variable burnpoller reads. The names are an
// interface: other tools drive the binary through them.
type Config struct {
	DatabaseURL          string        `envconfig:"DATABASE_URL" secret:"true" desc:"Postgres connection string (URL or key=value); required"`
	DatabaseDirectURL    string        `envconfig:"DATABASE_DIRECT_URL" secret:"true" desc:"connection string that reaches Postgres itself, not through a transaction pooler, for what needs a session: migrations (a session lock) and LISTEN (events --follow, tail, webhook wake-ups); default DATABASE_URL"`
	DatabaseExecMode     string        `envconfig:"DATABASE_EXEC_MODE" default:"cache_describe" desc:"how statements are sent (pgx's exec modes): cache_describe (unnamed statements, descriptions cached: works through PgBouncer in transaction mode, any version, and direct), cache_statement (named prepared statements: direct, or PgBouncer >= 1.21 with max_prepared_statements set), describe_exec, exec or simple_protocol"`
	DatabaseMaxConns     int32         `envconfig:"DATABASE_MAX_CONNS" default:"4" desc:"most connections each pool of a process opens (1 to 100): the ledger's, and the webhook deliveries' when WEBHOOK_URL is set"`
	RPCURL               string        `envconfig:"RPC_URL" secret:"true" desc:"JSON-RPC endpoints of the chain (http, https, ws, wss), comma-separated in order of preference; required"`
	RPCWSURL             string        `envconfig:"RPC_WS_URL" secret:"true" desc:"optional WebSocket endpoint (ws, wss) for newHeads: a new head ends the wait after reaching the target at once; polling goes on if it drops"`
	ChainID              uint64        `envconfig:"CHAIN_ID" desc:"chain id the node must report; required"`
	BurnContract         string        `envconfig:"BURN_CONTRACT" desc:"address of the BurnWithDigest contract, or several comma-separated, each optionally with @<first block> (0xA,0xB@19000000); the first names the group; required"`
	StartBlock           int64         `envconfig:"START_BLOCK" default:"0" desc:"first block to scan when the cursor does not exist yet"`
	CursorID             string        `envconfig:"CURSOR_ID" desc:"cursor row shared by the replicas of one group (default <chain id>:<contract>)"`
	Finality             string        `envconfig:"FINALITY" default:"finalized" chain:"true" desc:"target block: finalized, safe, or latest minus CONFIRMATIONS (a well-known CHAIN_ID has its own default)"`
	Confirmations        uint64        `envconfig:"CONFIRMATIONS" default:"12" chain:"true" desc:"blocks behind the head when FINALITY=latest (ignored otherwise)"`
	PollInterval         time.Duration `envconfig:"POLL_INTERVAL" default:"2s" desc:"once at the target, how often the chain is looked at again (from the start of the last look)"`
	MaxBlockRange        uint64        `envconfig:"MAX_BLOCK_RANGE" default:"2000" chain:"true" desc:"blocks per eth_getLogs call: unset, the first size, which grows up to 100000 on sparse chains while replies are small and fast and shrinks to what the provider accepts; set, also the most ever asked (a well-known CHAIN_ID has its own first size)"`
	VerifyReceipts       bool          `envconfig:"VERIFY_RECEIPTS" default:"true" desc:"confirm every burn in its transaction's receipt (eth_getBlockReceipts) before it is credited"`
	RPCQuorum            int           `envconfig:"RPC_QUORUM" default:"1" desc:"how many distinct RPC_URL endpoints must give the same target and burns before a range is credited"`
	LockWait             time.Duration `envconfig:"LOCK_WAIT" derived:"min(5s, TX_TIMEOUT/6)" desc:"how long a standby replica waits for the cursor lock before retrying (lock_timeout); below TX_TIMEOUT"`
	TxTimeout            time.Duration `envconfig:"TX_TIMEOUT" default:"30s" desc:"bound of one range's transaction, enforced by Postgres (statement and idle-in-transaction timeouts)"`
	RPCTimeout           time.Duration `envconfig:"RPC_TIMEOUT" derived:"min(10s, TX_TIMEOUT/3)" desc:"bound of one JSON-RPC request; at most TX_TIMEOUT"`
	RescanDepth          int64         `envconfig:"RESCAN_DEPTH" default:"64" desc:"committed blocks below the cursor re-read now and then to catch burns a node left out (0 disables)"`
	RescanInterval       time.Duration `envconfig:"RESCAN_INTERVAL" default:"1m" desc:"least time between rescans"`
	HTTPAddr             string        `envconfig:"HTTP_ADDR" default:":8080" desc:"listen address for /livez, /readyz and /metrics"`
	ShutdownTimeout      time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"15s" desc:"time after SIGTERM for the in-flight transaction and the HTTP server to finish"`
	LogLevel             string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat            string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	Migrate              bool          `envconfig:"MIGRATE" default:"true" desc:"apply database migrations at start"`
	Pending              bool          `envconfig:"PENDING" default:"true" desc:"track burns between the finality target and the head: pending_payments and seen/retracted events (never a credit)"`
	PendingMaxBlocks     int64         `envconfig:"PENDING_MAX_BLOCKS" default:"10000" desc:"most blocks above the finality target that head tracking reads"`
	WebhookURL           string        `envconfig:"WEBHOOK_URL" secret:"true" desc:"endpoints (http, https) that receive payment events as signed POSTs, comma-separated; every replica delivers"`
	WebhookSecret        string        `envconfig:"WEBHOOK_SECRET" secret:"true" desc:"HMAC-SHA256 key of the Burnpoller-Signature header; required with WEBHOOK_URL"`
	WebhookEvents        string        `envconfig:"WEBHOOK_EVENTS" default:"confirmed" desc:"event kinds delivered: any of seen,retracted,confirmed"`
	WebhookTimeout       time.Duration `envconfig:"WEBHOOK_TIMEOUT" default:"10s" desc:"bound of one delivery attempt"`
	WebhookMaxAge        time.Duration `envconfig:"WEBHOOK_MAX_AGE" default:"72h" desc:"how long a delivery is retried (jittered back-off, 1s to 1h) before it is dead-lettered"`
	AllowContractRemoval bool          `envconfig:"ALLOW_CONTRACT_REMOVAL" default:"false" desc:"let this replica stop the group following a contract its BURN_CONTRACT no longer lists (otherwise such a replica refuses to write: it may be one with an older configuration)"`
	AllowHookChange      bool          `envconfig:"ALLOW_HOOK_CHANGE" default:"false" desc:"make this replica's PAYMENT_HOOK_SQL the group's hook when it differs from the one the group recorded (otherwise such a replica refuses to start, and running ones with another hook stop writing)"`
	// lockWaitSet and rpcTimeoutSet say the user set LOCK_WAIT and
	// RPC_TIMEOUT; otherwise they were derived from TX_TIMEOUT.
	lockWaitSet, rpcTimeoutSet bool `ignored:"true"`
	// maxBlockRangeSet says the user set MAX_BLOCK_RANGE: a hard cap, not
	// a first size that grows.
	maxBlockRangeSet bool `ignored:"true"`
	// fromChain names the chain whose table gave the variables (by key)
	// the user did not set.
	fromChain map[string]chain.Defaults `ignored:"true"`

	PaymentHookSQL string `envconfig:"PAYMENT_HOOK_SQL" secret:"true" desc:"SQL run in the same transaction for each newly inserted payment ($1 id, $2 chain_id, $3 contract, $4 tx_hash, $5 log_index, $6 block_number, $7 block_hash, $8 payer, $9 digest, $10 amount, $11 burned_at)"`
}

// Scope says which variables a subcommand needs.
type Scope int

const (
	ScopeRun     Scope = iota // everything
	ScopeMigrate              // the database and logging only
)

// loadConfig reads the environment and returns the config with every
// problem found, one line each, so that a user fixes them all in one go.
func Load(s Scope) (Config, []string) {
	cfg, problems := parseEnv()
	unparsed := make(map[string]bool, len(problems))
	for _, p := range problems {
		unparsed[strings.SplitN(p, ":", 2)[0]] = true
	}
	for _, p := range cfg.validate(s) {
		// A variable that did not parse was reported already.
		if !unparsed[strings.SplitN(p, ":", 2)[0]] {
			problems = append(problems, p)
		}
	}
	return cfg, problems
}

// parseEnv runs envconfig, collecting every unparseable variable rather
// than stopping at the first, and never changes the environment: after a
// variable fails to parse, envconfig runs again on the variables not
// failed so far (a struct of those fields, made with reflect.StructOf), and
// a failed variable takes its default, as if unset.
func parseEnv() (Config, []string) {
	var (
		problems []string
		failed   = map[string]bool{}
		fields   reflect.Value
	)
	for {
		fields = parsedFields(failed)
		err := envconfig.Process("", fields.Addr().Interface())
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			problems = append(problems, parseProblem(pe))
			failed[pe.KeyName] = true
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
		}
		break
	}
	cfg := fromFields(fields, failed)
	// A variable that did not parse counts as unset: it gets the derived
	// value, and only its parse problem is reported.
	set := func(key string) bool {
		_, set := os.LookupEnv(key)
		return set && !failed[key]
	}
	cfg.deriveTimeouts(set)
	cfg.applyChainDefaults(set)
	cfg.maxBlockRangeSet = set("MAX_BLOCK_RANGE")
	return cfg, problems
}

// parsedFields is a zero value of a struct of Config's variables, except
// those in failed. Processed by envconfig, it reads them as Config would.
func parsedFields(failed map[string]bool) reflect.Value {
	t := reflect.TypeFor[Config]()
	var fields []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if key := f.Tag.Get("envconfig"); key != "" && !failed[key] {
			fields = append(fields, f)
		}
	}
	return reflect.New(reflect.StructOf(fields)).Elem()
}

// fromFields copies what envconfig read into a Config; the variables in
// failed get their defaults, as envconfig gives an unset variable.
func fromFields(v reflect.Value, failed map[string]bool) Config {
	var cfg Config
	out := reflect.ValueOf(&cfg).Elem()
	for i := range v.NumField() {
		out.FieldByName(v.Type().Field(i).Name).Set(v.Field(i))
	}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if def := f.Tag.Get("default"); failed[f.Tag.Get("envconfig")] && def != "" {
			setDefault(out.Field(i), def)
		}
	}
	return cfg
}

// setDefault gives field its default tag's value, parsed as envconfig
// parses it (the defaults are this file's own, and always parse).
func setDefault(field reflect.Value, def string) {
	one := reflect.New(reflect.StructOf([]reflect.StructField{{
		// A name no environment sets: envconfig gives it the default.
		Name: "V", Type: field.Type(), Tag: reflect.StructTag(`envconfig:"BURNPOLLER_DEFAULT_OF_A_BAD_VARIABLE" default:"` + def + `"`),
	}}))
	_ = envconfig.Process("", one.Interface())
	field.Set(one.Elem().Field(0))
}

// The most LOCK_WAIT and RPC_TIMEOUT are when derived from TX_TIMEOUT.
const (
	maxDerivedLockWait   = 5 * time.Second
	maxDerivedRPCTimeout = 10 * time.Second
)

// deriveTimeouts fills in LOCK_WAIT and RPC_TIMEOUT when the user did not
// set them: min(5s, TX_TIMEOUT/6) and min(10s, TX_TIMEOUT/3), whole
// milliseconds. The client's deadline for a range's transaction is
// TX_TIMEOUT, and it covers the wait for the cursor lock and the node's
// calls made under the lock; the defaults keep the proportions of the
// default TX_TIMEOUT=30s (5s and 10s), so that a full lock wait plus a full
// RPC call use at most half of any TX_TIMEOUT, leaving the rest for the
// inserts and a retried call. A longer TX_TIMEOUT keeps 5s and 10s: a
// longer lock wait only delays a standby's next try, and a longer call only
// delays the retry on another endpoint.
func (c *Config) deriveTimeouts(set func(key string) bool) {
	c.lockWaitSet, c.rpcTimeoutSet = set("LOCK_WAIT"), set("RPC_TIMEOUT")
	if !c.lockWaitSet {
		c.LockWait = min(maxDerivedLockWait, (c.TxTimeout / 6).Truncate(time.Millisecond))
	}
	if !c.rpcTimeoutSet {
		c.RPCTimeout = min(maxDerivedRPCTimeout, (c.TxTimeout / 3).Truncate(time.Millisecond))
	}
}

// rangeGrowTo is the most blocks eth_getLogs ranges grow to on sparse
// chains when MAX_BLOCK_RANGE is unset: 50 times the default first size,
// hours to days of chain, and within what nodes without a cap answer fast.
const rangeGrowTo = 100_000

// maxRange is the most blocks one eth_getLogs call may ask for: the
// user's MAX_BLOCK_RANGE, or, when unset, rangeGrowTo (ranges start at the
// default and grow).
func (c Config) MaxRange() uint64 {
	if c.maxBlockRangeSet {
		return c.MaxBlockRange
	}
	return max(c.MaxBlockRange, rangeGrowTo)
}

// applyChainDefaults takes FINALITY, CONFIRMATIONS and MAX_BLOCK_RANGE from
// the table of well-known chains when CHAIN_ID is in it and the user did not
// set them; other chains keep the variables' defaults.
func (c *Config) applyChainDefaults(set func(key string) bool) {
	d, ok := chain.KnownChain(c.ChainID)
	if !ok {
		return
	}
	c.fromChain = map[string]chain.Defaults{}
	if !set("FINALITY") {
		c.Finality = string(d.Finality)
		c.fromChain["FINALITY"] = d
	}
	if !set("CONFIRMATIONS") && d.Finality == chain.FinalityLatest {
		c.Confirmations = d.Confirmations
		c.fromChain["CONFIRMATIONS"] = d
	}
	if !set("MAX_BLOCK_RANGE") {
		c.MaxBlockRange = d.MaxBlockRange
		c.fromChain["MAX_BLOCK_RANGE"] = d
	}
}

func parseProblem(pe *envconfig.ParseError) string {
	want := map[string]string{
		"uint64":        "a whole number >= 0",
		"int64":         "a whole number",
		"int":           "a whole number",
		"time.Duration": "a duration such as 500ms, 2s or 1m",
		"bool":          "true or false",
	}[pe.TypeName]
	if want == "" {
		want = "a " + pe.TypeName
	}
	return fmt.Sprintf("%s: %q is not %s", pe.KeyName, pe.Value, want)
}

var cursorIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._/-]{0,199}$`)

// validate checks ranges and relations and returns every problem.
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

// database is where and how the process's pools connect.
func (c *Config) Database() database.Options {
	return database.Options{URL: c.DatabaseURL, DirectURL: c.DatabaseDirectURL, ExecMode: c.DatabaseExecMode, MaxConns: c.DatabaseMaxConns}
}

// cursorID is CURSOR_ID or, by default, "<chain id>:<first contract>": a
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

// contracts are BURN_CONTRACT's contracts; call only after validation.
func (c *Config) Contracts() []poller.Contract {
	cs, err := poller.ParseContracts(c.BurnContract, checkAddress)
	if err != nil {
		panic(fmt.Sprintf("BURN_CONTRACT not validated: %v", err))
	}
	return cs
}

// rpcURLs splits RPC_URL into its endpoints.
func (c *Config) RPCURLs() []string {
	var out []string
	for _, u := range strings.Split(c.RPCURL, ",") {
		out = append(out, strings.TrimSpace(u))
	}
	return out
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

// printConfig writes every variable with its default, its current value
// (secrets redacted) and its meaning.
func Print(w io.Writer) error {
	// The values derived from others, as the loader derives them.
	resolved, _ := parseEnv()
	rv := reflect.ValueOf(resolved)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tVALUE\tMEANING")
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		tag := t.Field(i).Tag
		key := tag.Get("envconfig")
		if key == "" {
			continue
		}
		value, set := os.LookupEnv(key)
		d, fromChain := resolved.fromChain[key]
		switch {
		case !set && fromChain:
			value = fmt.Sprintf("(%s) %v: %s", d.Name, rv.Field(i).Interface(), d.Reason)
		case !set && tag.Get("derived") != "":
			value = fmt.Sprintf("(default) %v", rv.Field(i).Interface())
		case !set:
			value = "(default)"
		case tag.Get("secret") == "true":
			value = redactSecret(key, value)
		}
		def := cmp.Or(tag.Get("default"), tag.Get("derived"), "-")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", key, def, value, tag.Get("desc"))
	}
	return tw.Flush()
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

// webhookConfig is the dispatcher's configuration; ok is false without
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

// redactSecret shows a secret variable's shape without its secret parts.
// Any other secret variable (PAYMENT_HOOK_SQL, which may hold a dblink
// password) shows only that it is set.
func redactSecret(key, value string) string {
	switch key {
	case "RPC_WS_URL":
		return chain.RedactURL(value)
	case "RPC_URL":
		var parts []string
		for _, u := range strings.Split(value, ",") {
			parts = append(parts, chain.RedactURL(strings.TrimSpace(u)))
		}
		return strings.Join(parts, ",")
	case "DATABASE_URL", "DATABASE_DIRECT_URL":
		return database.Redact(value)
	case "WEBHOOK_URL":
		eps, err := webhooks.ParseEndpoints(value)
		if err != nil {
			return "(set, unparseable, redacted)"
		}
		labels := make([]string, len(eps))
		for i, e := range eps {
			labels[i] = e.Label
		}
		return strings.Join(labels, ",")
	}
	return "(set, redacted)"
}
