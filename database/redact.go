package database

import (
	"errors"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/internal/redact"
)

// Redact shows a connection string as pgx resolves it (hosts,
// ports, user, database, TLS mode, connect timeout, runtime parameters),
// written in the form it was given (URL or key=value), with the password
// replaced by xxxxx. It is rebuilt from the parsed settings rather than
// edited in place, so no quoting or escaping of the password can leak part
// of it; a string pgx cannot parse shows nothing at all.
func Redact(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparseable, redacted)"
	}
	v := viewDSN(cfg)
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && (scheme == "postgres" || scheme == "postgresql") {
		return v.url(scheme)
	}
	return v.keywordValue()
}

// ParseProblem is why pgx could not parse a connection string, when that is
// a TLS file it could not use (": <cause>"): pgx's own message quotes the
// string, and other causes (a URL that does not parse) may quote the
// password, so they are left out ("").
func ParseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) || pe.Unwrap() == nil {
		return ""
	}
	cause := pe.Unwrap()
	var ue *url.Error
	if errors.As(cause, &ue) {
		return ""
	}
	if msg := cause.Error(); strings.Contains(msg, "TLS") || strings.Contains(msg, "cert") || strings.Contains(msg, "CA file") || strings.Contains(msg, "key") {
		return ": " + msg
	}
	return ""
}

// redacted stands for a secret value in output.
const redacted = "xxxxx"

// dsnView is what a connection string may show.
type dsnView struct {
	hosts, ports []string
	user         string
	password     bool
	database     string
	params       map[string]string // sslmode, connect_timeout and runtime parameters
}

func viewDSN(cfg *pgconn.Config) dsnView {
	v := dsnView{user: cfg.User, password: cfg.Password != "", database: cfg.Database, params: map[string]string{}}
	// Fallbacks repeat a host once per TLS attempt; show each host once.
	seen := map[string]bool{}
	addHost := func(host string, port uint16) {
		p := strconv.Itoa(int(port))
		if !seen[host+"\x00"+p] {
			seen[host+"\x00"+p] = true
			v.hosts, v.ports = append(v.hosts, host), append(v.ports, p)
		}
	}
	addHost(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		addHost(f.Host, f.Port)
	}
	v.params["sslmode"] = sslMode(cfg)
	if cfg.ConnectTimeout > 0 {
		v.params["connect_timeout"] = strconv.Itoa(int(cfg.ConnectTimeout / time.Second))
	}
	for k, val := range cfg.RuntimeParams {
		// An unknown key becomes a runtime parameter: a misspelt
		// password would be one, and so would a key pasted as a name
		// (?<key>=).
		switch {
		case keyAsName(k, val):
			k, val = redacted, redacted
		case secretLike(k):
			val = redacted
		}
		v.params[k] = val
	}
	return v
}

// keyAsName says a runtime parameter may be a key given as a name: one
// without a value, or whose name looks like a key (redact.KeyLike), as no
// Postgres setting's name does.
func keyAsName(name, value string) bool {
	return value == "" || redact.KeyLike(name)
}

// secretLike says a parameter's name suggests a secret (password,
// pasword, passwd, pwd, secret, token, key).
func secretLike(name string) bool {
	name = strings.ToLower(name)
	for _, part := range []string{"pas", "pw", "secret", "token", "key"} {
		if strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// sslMode names the TLS behaviour pgx derived for the first host: whether
// it tries TLS, falls back to plain text or the other way round, and how it
// verifies the server.
func sslMode(cfg *pgconn.Config) string {
	var fallback *pgconn.FallbackConfig
	for _, f := range cfg.Fallbacks {
		if f.Host == cfg.Host && f.Port == cfg.Port {
			fallback = f
			break
		}
	}
	switch t := cfg.TLSConfig; {
	case t == nil && fallback != nil && fallback.TLSConfig != nil:
		return "allow"
	case t == nil:
		return "disable"
	case fallback != nil && fallback.TLSConfig == nil:
		return "prefer"
	case t.VerifyPeerCertificate != nil:
		return "verify-ca"
	case t.InsecureSkipVerify:
		return "require"
	default:
		return "verify-full"
	}
}

// url writes v as a postgres:// URL. Hosts that are socket directories go
// in the query, as a URL's host part cannot hold a path.
func (v dsnView) url(scheme string) string {
	u := url.URL{Scheme: scheme, Path: "/" + v.database}
	switch {
	case v.user != "" && v.password:
		u.User = url.UserPassword(v.user, redacted)
	case v.user != "":
		u.User = url.User(v.user)
	}
	q := url.Values{}
	for k, val := range v.params {
		q.Set(k, val)
	}
	if slices.ContainsFunc(v.hosts, func(h string) bool { return strings.HasPrefix(h, "/") }) {
		q.Set("host", strings.Join(v.hosts, ","))
		q.Set("port", strings.Join(v.ports, ","))
	} else {
		addrs := make([]string, len(v.hosts))
		for i, h := range v.hosts {
			addrs[i] = net.JoinHostPort(h, v.ports[i])
		}
		u.Host = strings.Join(addrs, ",")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// keywordValue writes v as key=value pairs, quoting values as libpq reads them.
func (v dsnView) keywordValue() string {
	pairs := []string{"host=" + quoteDSNValue(strings.Join(v.hosts, ",")), "port=" + quoteDSNValue(strings.Join(v.ports, ","))}
	if v.user != "" {
		pairs = append(pairs, "user="+quoteDSNValue(v.user))
	}
	if v.password {
		pairs = append(pairs, "password="+redacted)
	}
	if v.database != "" {
		pairs = append(pairs, "dbname="+quoteDSNValue(v.database))
	}
	for _, k := range slices.Sorted(maps.Keys(v.params)) {
		pairs = append(pairs, quoteDSNValue(k)+"="+quoteDSNValue(v.params[k]))
	}
	return strings.Join(pairs, " ")
}

func quoteDSNValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\r\v\f'\\=") {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
