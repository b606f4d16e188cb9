package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/kelseyhightower/envconfig"

	"github.com/burnpoller/burnpoller/chain"
)

// Config is every environment variable burnpoller reads. The names are an
// interface: other tools drive the binary through them.
type Config struct {
	DatabaseURL     string        `envconfig:"DATABASE_URL" secret:"true" desc:"Postgres connection string (URL or key=value); required"`
	RPCURL          string        `envconfig:"RPC_URL" secret:"true" desc:"JSON-RPC endpoints of the chain (http, https, ws, wss), comma-separated in order of preference; required"`
	RPCWSURL        string        `envconfig:"RPC_WS_URL" secret:"true" desc:"optional WebSocket endpoint (ws, wss) for newHeads: a new head ends the wait after reaching the target at once; polling goes on if it drops"`
	ChainID         uint64        `envconfig:"CHAIN_ID" desc:"chain id the node must report; required"`
	BurnContract    string        `envconfig:"BURN_CONTRACT" desc:"address of the BurnWithDigest contract; required"`
	StartBlock      uint64        `envconfig:"START_BLOCK" default:"0" desc:"first block to scan when the cursor does not exist yet"`
	CursorID        string        `envconfig:"CURSOR_ID" desc:"cursor row shared by the replicas of one group (default <chain id>:<contract>)"`
	Finality        string        `envconfig:"FINALITY" default:"finalized" desc:"target block: finalized, safe, or latest minus CONFIRMATIONS"`
	Confirmations   uint64        `envconfig:"CONFIRMATIONS" default:"12" desc:"blocks behind the head when FINALITY=latest (ignored otherwise)"`
	PollInterval    time.Duration `envconfig:"POLL_INTERVAL" default:"2s" desc:"pause after reaching the target"`
	MaxBlockRange   uint64        `envconfig:"MAX_BLOCK_RANGE" default:"2000" desc:"most blocks per eth_getLogs call and per transaction"`
	LockWait        time.Duration `envconfig:"LOCK_WAIT" default:"5s" desc:"how long a standby replica waits for the cursor lock before retrying (lock_timeout)"`
	TxTimeout       time.Duration `envconfig:"TX_TIMEOUT" default:"30s" desc:"bound of one range's transaction, enforced by Postgres (statement and idle-in-transaction timeouts)"`
	RPCTimeout      time.Duration `envconfig:"RPC_TIMEOUT" default:"10s" desc:"bound of one JSON-RPC request"`
	RescanDepth     uint64        `envconfig:"RESCAN_DEPTH" default:"64" desc:"committed blocks below the cursor re-read now and then to catch burns a node left out (0 disables)"`
	RescanInterval  time.Duration `envconfig:"RESCAN_INTERVAL" default:"1m" desc:"least time between rescans"`
	HTTPAddr        string        `envconfig:"HTTP_ADDR" default:":8080" desc:"listen address for /livez, /readyz and /metrics"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"15s" desc:"time after SIGTERM for the in-flight transaction and the HTTP server to finish"`
	LogLevel        string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat       string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	Migrate         bool          `envconfig:"MIGRATE" default:"true" desc:"apply database migrations at start"`
	// readOnly makes every database session read-only (verify).
	readOnly bool `ignored:"true"`

	PaymentHookSQL string `envconfig:"PAYMENT_HOOK_SQL" desc:"SQL run in the same transaction for each newly inserted payment ($1 id, $2 chain_id, $3 contract, $4 tx_hash, $5 log_index, $6 block_number, $7 block_hash, $8 payer, $9 digest, $10 amount, $11 burned_at)"`
}

// scope says which variables a subcommand needs.
type scope int

const (
	scopeRun     scope = iota // everything
	scopeMigrate              // the database and logging only
)

// loadConfig reads the environment and returns the config with every
// problem found, one line each, so that a user fixes them all in one go.
func loadConfig(s scope) (Config, []string) {
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
// than stopping at the first. A bad variable is unset for the retry and
// restored afterwards.
func parseEnv() (Config, []string) {
	var (
		cfg      Config
		problems []string
		restore  = map[string]string{}
	)
	defer func() {
		for k, v := range restore {
			os.Setenv(k, v)
		}
	}()
	for {
		cfg = Config{}
		err := envconfig.Process("", &cfg)
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			problems = append(problems, parseProblem(pe))
			restore[pe.KeyName] = os.Getenv(pe.KeyName)
			os.Unsetenv(pe.KeyName)
			continue
		}
		if err != nil {
			problems = append(problems, err.Error())
		}
		return cfg, problems
	}
}

func parseProblem(pe *envconfig.ParseError) string {
	want := map[string]string{
		"uint64":        "a whole number >= 0",
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
func (c *Config) validate(s scope) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if c.DatabaseURL == "" {
		add("DATABASE_URL: required (e.g. postgres://user:password@host:5432/db)")
	} else if _, err := pgconn.ParseConfig(c.DatabaseURL); err != nil {
		add("DATABASE_URL: not a valid Postgres connection string")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("LOG_LEVEL: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		add("LOG_FORMAT: %q is not one of json, text", c.LogFormat)
	}
	if s == scopeMigrate {
		return p
	}

	if c.RPCURL == "" {
		add("RPC_URL: required (e.g. https://node.example:8545, or several separated by commas)")
	} else {
		for i, u := range c.rpcURLs() {
			if err := checkRPCURL(u); err != nil {
				add("RPC_URL: endpoint %d: %v", i+1, err)
				break
			}
		}
	}
	if c.RPCWSURL != "" {
		if err := checkRPCURL(c.RPCWSURL); err != nil {
			add("RPC_WS_URL: %v", err)
		} else if u, _ := url.Parse(c.RPCWSURL); u.Scheme != "ws" && u.Scheme != "wss" {
			add("RPC_WS_URL: scheme %q is not ws or wss", u.Scheme)
		}
	}
	if c.ChainID == 0 {
		add("CHAIN_ID: required, a positive chain id")
	} else if c.ChainID > math.MaxInt64 {
		add("CHAIN_ID: %d is out of range", c.ChainID)
	}
	if c.BurnContract == "" {
		add("BURN_CONTRACT: required, the contract's 0x address")
	} else if err := checkAddress(c.BurnContract); err != nil {
		add("BURN_CONTRACT: %v", err)
	}
	if c.StartBlock > 1<<62 {
		add("START_BLOCK: %d is out of range", c.StartBlock)
	}
	if c.CursorID != "" && !cursorIDPattern.MatchString(c.CursorID) {
		add("CURSOR_ID: %q must be 1-200 characters of letters, digits and :._/-", c.CursorID)
	}
	switch chain.Finality(c.Finality) {
	case chain.FinalityFinalized, chain.FinalitySafe, chain.FinalityLatest:
	default:
		add("FINALITY: %q is not one of finalized, safe, latest", c.Finality)
	}
	if c.Confirmations > 100_000 {
		add("CONFIRMATIONS: %d is more than 100000", c.Confirmations)
	}
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Hour {
		add("POLL_INTERVAL: %s is not between 10ms and 1h", c.PollInterval)
	}
	if c.MaxBlockRange < 1 || c.MaxBlockRange > 1_000_000 {
		add("MAX_BLOCK_RANGE: %d is not between 1 and 1000000", c.MaxBlockRange)
	}
	if c.LockWait < 10*time.Millisecond {
		add("LOCK_WAIT: %s is less than 10ms", c.LockWait)
	}
	if c.TxTimeout < 100*time.Millisecond || c.TxTimeout > time.Hour {
		add("TX_TIMEOUT: %s is not between 100ms and 1h", c.TxTimeout)
	} else if c.LockWait >= c.TxTimeout {
		add("LOCK_WAIT: %s must be less than TX_TIMEOUT (%s)", c.LockWait, c.TxTimeout)
	}
	if c.RPCTimeout < 10*time.Millisecond {
		add("RPC_TIMEOUT: %s is less than 10ms", c.RPCTimeout)
	} else if c.TxTimeout >= 100*time.Millisecond && c.RPCTimeout > c.TxTimeout {
		add("RPC_TIMEOUT: %s must not exceed TX_TIMEOUT (%s)", c.RPCTimeout, c.TxTimeout)
	}
	if c.RescanDepth > 100_000 {
		add("RESCAN_DEPTH: %d is more than 100000", c.RescanDepth)
	}
	if c.RescanInterval < time.Second || c.RescanInterval > 24*time.Hour {
		add("RESCAN_INTERVAL: %s is not between 1s and 24h", c.RescanInterval)
	}
	if err := checkListenAddr(c.HTTPAddr); err != nil {
		add("HTTP_ADDR: %v", err)
	}
	if c.ShutdownTimeout < 100*time.Millisecond || c.ShutdownTimeout > 10*time.Minute {
		add("SHUTDOWN_TIMEOUT: %s is not between 100ms and 10m", c.ShutdownTimeout)
	}
	return p
}

// cursorID is CURSOR_ID or, by default, "<chain id>:<contract>".
func (c *Config) cursorID() string {
	if c.CursorID != "" {
		return c.CursorID
	}
	return fmt.Sprintf("%d:%s", c.ChainID, strings.ToLower(c.BurnContract))
}

// rpcURLs splits RPC_URL into its endpoints.
func (c *Config) rpcURLs() []string {
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
func printConfig(w io.Writer) error {
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
		switch {
		case !set:
			value = "(default)"
		case tag.Get("secret") == "true":
			value = redactSecret(key, value)
		}
		def := tag.Get("default")
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", key, def, value, tag.Get("desc"))
	}
	return tw.Flush()
}

// redactSecret shows a secret variable's shape without its secret parts.
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
	case "DATABASE_URL":
		return redactDatabaseURL(value)
	}
	return "(set, redacted)"
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDatabaseURL hides the password of a URL or key=value connection string.
func redactDatabaseURL(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparseable, redacted)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsnPassword.ReplaceAllString(dsn, "${1}xxxxx")
}
