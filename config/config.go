// Package config builds the gateway's static configuration from defaults,
// an optional YAML file, WAMUX_* environment variables and command-line
// flags, in that order of precedence (flags win).
//
// Runtime settings that change without a restart (gap_timeout, bloom, …)
// live in the store and are changed through /v1/config. The file may also
// carry them under "settings:"; the gateway applies those at start and
// again on SIGHUP (ReadSettings), so an operator can manage them as a file.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/apikey"
	"github.com/wamux/wamux/internal/baseurl"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/settings"
)

// Defaults for a gateway started with no configuration at all: an embedded,
// loopback-only gateway keeping its data in ./data.
const (
	ListenDefault          = "127.0.0.1:8080"
	DataDirDefault         = "data"
	StoreDefault           = "sqlite"
	LogFormatDefault       = "text"
	LogLevelDefault        = "info"
	ShutdownTimeoutDefault = 15 * time.Second
	// ReceiptBloomPerHourDefault sizes the receipt pipeline's Bloom filter
	// (L2) for 200,000 distinct receipts an hour: 28 MB for the 48 hourly
	// filters, allocated at the first receipt.
	ReceiptBloomPerHourDefault = 200_000
	// ReceiptBloomPerHourMax keeps a typo from allocating more memory than
	// a gateway has: 50,000,000 keys an hour take about 6.6 GiB.
	ReceiptBloomPerHourMax = 50_000_000
	// RedisPrefixDefault starts the cluster's Redis keys and channels.
	RedisPrefixDefault = "wamux:"
	// ProviderBaseURLsDefault allows Meta's Graph API only.
	ProviderBaseURLsDefault = wamux.DefaultBaseURL
)

// Config is the static configuration of `wamux serve`.
type Config struct {
	// Listen is the HTTP address; loopback by default because /metrics and
	// the dashboard are unauthenticated.
	Listen string `yaml:"listen"`
	// DataDir holds the SQLite database in embedded mode.
	DataDir string `yaml:"data_dir"`
	// Store is "sqlite" (embedded) or a PostgreSQL URL (postgres://…).
	Store string `yaml:"store"`
	// Kafka and Redis are the cluster backends (seed brokers, address);
	// empty means in-process. Cluster mode takes both and a PostgreSQL
	// Store, or none of them (Validate).
	Kafka string `yaml:"kafka"`
	Redis string `yaml:"redis"`
	// RedisPrefix starts every Redis key and channel of this cluster, so
	// that several clusters (or tests) can share one server; every node of
	// a cluster must be given the same.
	RedisPrefix string `yaml:"redis_prefix"`
	// NodeID names this node among the cluster's (account ownership,
	// logs); empty: the host name. Unused in embedded mode.
	NodeID string `yaml:"node_id"`
	// APIKeys authenticate /v1 (Authorization: Bearer <key>): each a key,
	// optionally with scopes after a colon joined by '+' ("k2:send",
	// "k3:read+send"; see internal/apikey); without scopes a key has all.
	APIKeys []string `yaml:"api_keys"`
	// AppSecret verifies X-Hub-Signature-256 on /webhook: a Meta app
	// secret, or several separated by commas (one per app whose webhooks
	// come here, or the old and the new one during a rotation).
	AppSecret string `yaml:"app_secret"`
	// VerifyToken answers Meta's webhook verification handshake.
	VerifyToken string `yaml:"verify_token"`
	// SecretKey encrypts secrets at rest (the accounts' access tokens,
	// subscription signing secrets): base64 of 32 bytes, several
	// comma-separated during a rotation (the first encrypts, all decrypt).
	// Empty: a key file in the data directory, created on first start;
	// `wamux serve` takes that only with InsecureDev (CheckSecretKey).
	SecretKey string `yaml:"secret_key"`
	// InsecureDev (--insecure-dev, no file key or variable) lets `wamux
	// serve` start without SecretKey, keeping the key next to the data it
	// protects: for development only.
	InsecureDev bool `yaml:"-"`
	// ProviderBaseURLs are the base URLs an account's base_url may fall
	// under (comma-separated; internal/baseurl says how they match): the
	// account's access token goes there.
	ProviderBaseURLs string `yaml:"provider_base_urls"`
	// EventAllowNetworks are CIDRs where event subscriptions may point
	// although private, loopback or link-local, and where plain http is
	// accepted (comma-separated).
	EventAllowNetworks string `yaml:"event_allow_networks"`
	// LogFormat is "text" or "json"; LogLevel one of debug, info, warn, error.
	LogFormat string `yaml:"log_format"`
	LogLevel  string `yaml:"log_level"`
	// ShutdownTimeout bounds the drain of in-flight work on SIGINT/SIGTERM.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// ReceiptBloomPerHour is how many distinct receipts an hour the
	// receipt pipeline's Bloom filter holds at its designed 1 % false
	// positives over 48 hours. Beyond it the rate climbs and more receipts
	// are confirmed against the store (none is lost either way); memory is
	// about 141 bytes per key. Static: it sizes memory at start.
	ReceiptBloomPerHour int `yaml:"receipt_bloom_per_hour"`
	// MaxConnections caps the HTTP connections open at once; the next
	// ones wait in the kernel's backlog. 0: half of the open-file limit
	// (RLIMIT_NOFILE).
	MaxConnections int `yaml:"max_connections"`
	// Settings are runtime settings (the keys of /v1/config, values as
	// text: "90s", "false", "5000"), applied at start and on SIGHUP over
	// what the store holds. Load checks each key and value on its own
	// (settings.Check); the gateway checks them together when it applies
	// them.
	Settings map[string]string `yaml:"settings"`
	// File is the configuration file Load read ("" when none); SIGHUP
	// re-reads its settings.
	File string `yaml:"-"`
}

// Duration is a time.Duration written as a Go duration string ("15s") in
// YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string. A bad one is a
// *yaml.TypeError with its line, as yaml's own type errors are, so that
// readFile names the key it belongs to; the value is not quoted (see
// hideValues).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	err := n.Decode(&s)
	var v time.Duration
	if err == nil {
		v, err = time.ParseDuration(s)
	}
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: must be a Go duration such as \"15s\"", n.Line)}}
	}
	*d = Duration(v)
	return nil
}

// Default returns the configuration used when nothing is given.
func Default() Config {
	return Config{
		Listen:          ListenDefault,
		DataDir:         DataDirDefault,
		Store:           StoreDefault,
		LogFormat:       LogFormatDefault,
		LogLevel:        LogLevelDefault,
		ShutdownTimeout: Duration(ShutdownTimeoutDefault),
		RedisPrefix:     RedisPrefixDefault,

		ProviderBaseURLs:    ProviderBaseURLsDefault,
		ReceiptBloomPerHour: ReceiptBloomPerHourDefault,
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	if c.Listen == "" {
		return errors.New("listen must not be empty")
	}
	// Checked here, not first by net.Listen: the gateway opens and claims
	// the store and starts sending before it listens.
	if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		return fmt.Errorf("listen must be host:port (127.0.0.1:8080, :8080), got %q", c.Listen)
	}
	if c.Store != "sqlite" && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		return fmt.Errorf("store must be \"sqlite\" or a postgres:// URL, got %q", redactURL(c.Store))
	}
	if c.Store == "sqlite" && c.DataDir == "" {
		return errors.New("data_dir must not be empty with the sqlite store")
	}
	if err := c.checkCluster(); err != nil {
		return err
	}
	if l, err := baseurl.Parse(c.ProviderBaseURLs); err != nil {
		return fmt.Errorf("provider_base_urls: %w", err)
	} else if l.Len() == 0 {
		return errors.New("provider_base_urls must name at least one base URL (default " + ProviderBaseURLsDefault + ")")
	}
	if _, err := netguard.ParseNetworks(c.EventAllowNetworks); err != nil {
		return fmt.Errorf("event_allow_networks: %w", err)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("log_format must be text or json, got %q", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("shutdown_timeout must be positive")
	}
	if c.ReceiptBloomPerHour <= 0 || c.ReceiptBloomPerHour > ReceiptBloomPerHourMax {
		return fmt.Errorf("receipt_bloom_per_hour must be between 1 and %d, got %d", ReceiptBloomPerHourMax, c.ReceiptBloomPerHour)
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("max_connections must be 0 (half the open-file limit) or positive, got %d", c.MaxConnections)
	}
	keys, err := apikey.Parse(c.APIKeys)
	if err != nil {
		return fmt.Errorf("api_keys: %w", err)
	}
	for _, k := range keys {
		if len(k.Secret) < 8 {
			return errors.New("every API key must be at least 8 characters")
		}
	}
	return nil
}

// Cluster reports whether c runs in cluster mode: Kafka, Redis and a
// PostgreSQL store, all three (Validate refuses a part of them).
func (c Config) Cluster() bool {
	return c.Kafka != "" && c.Redis != "" && c.Store != "sqlite"
}

// nodeIDPattern is what a node id may hold: it appears in the store, in
// logs and in metrics labels.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// checkCluster refuses a part of cluster mode: Kafka without Redis, either
// without a shared PostgreSQL store, or one of them with the embedded store
// a second node could never share.
func (c Config) checkCluster() error {
	if c.NodeID != "" && !nodeIDPattern.MatchString(c.NodeID) {
		return fmt.Errorf("node_id must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, got %q", c.NodeID)
	}
	if c.Kafka == "" && c.Redis == "" {
		return nil
	}
	var missing []string
	if c.Store == "sqlite" {
		missing = append(missing, "--store postgres://…")
	}
	if c.Kafka == "" {
		missing = append(missing, "--kafka")
	}
	if c.Redis == "" {
		missing = append(missing, "--redis")
	}
	if len(missing) > 0 {
		return fmt.Errorf("cluster mode takes --store postgres://…, --kafka and --redis together (or none of them); missing %s", strings.Join(missing, ", "))
	}
	for _, b := range splitList(c.Kafka) {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return fmt.Errorf("kafka must be comma-separated host:port seed brokers, got %q", b)
		}
	}
	if !strings.HasPrefix(c.Redis, "redis://") && !strings.HasPrefix(c.Redis, "rediss://") {
		if _, port, err := net.SplitHostPort(c.Redis); err != nil || port == "" {
			return fmt.Errorf("redis must be host:port or a redis:// URL, got %q", redactURL(c.Redis))
		}
	}
	return nil
}

// CheckSecretKey reports a configuration `wamux serve` must refuse: no
// secret_key without InsecureDev. A key file beside the database protects
// nothing against whoever copies the data directory.
func (c Config) CheckSecretKey() error {
	if c.SecretKey == "" && c.Cluster() {
		// Every node must open the tokens another node sealed, and derive
		// the same keys (recipients' names in Redis) from it.
		return errors.New("WAMUX_SECRET_KEY (secret_key) is required in cluster mode, the same on every node: " +
			"it encrypts the access tokens at rest and names recipients in Redis; --insecure-dev's key file is one node's own")
	}
	if c.SecretKey == "" && !c.InsecureDev {
		return errors.New("WAMUX_SECRET_KEY (secret_key) is required: it encrypts the access tokens and signing secrets at rest; " +
			"set it to the base64 of 32 random bytes (head -c 32 /dev/urandom | base64), " +
			"or pass --insecure-dev to keep a generated key in the data directory (development only)")
	}
	return nil
}

// Load builds the configuration of `wamux serve` from args (without the
// subcommand name) and the environment. Usage and flag errors are written
// to out. It returns flag.ErrHelp when --help was asked for.
func Load(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	flags, err := parseFlags(args, out)
	if err != nil {
		return Config{}, err
	}
	c := Default()
	if path := flags.configPath(getenv); path != "" {
		if err := readFile(path, &c); err != nil {
			return Config{}, err
		}
		c.File = path
	}
	if err := applyEnv(&c, getenv); err != nil {
		return Config{}, err
	}
	flags.applyTo(&c)
	if err := c.check(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// serveFlags are the parsed command-line flags of `wamux serve`.
type serveFlags struct {
	set          *flag.FlagSet
	configFile   *string
	listen       *string
	dataDir      *string
	store        *string
	kafka        *string
	redis        *string
	nodeID       *string
	logFormat    *string
	logLevel     *string
	shutdown     *time.Duration
	bloomPerHour *int
	maxConns     *int
	insecureDev  *bool
}

// parseFlags parses args, writing usage and flag errors to out.
func parseFlags(args []string, out io.Writer) (*serveFlags, error) {
	fs := flag.NewFlagSet("wamux serve", flag.ContinueOnError)
	fs.SetOutput(out)
	f := &serveFlags{
		set:        fs,
		configFile: fs.String("config", "", "YAML configuration file (optional; default $WAMUX_CONFIG)"),
		listen:     fs.String("listen", ListenDefault, "HTTP listen address"),
		dataDir:    fs.String("data-dir", DataDirDefault, "directory for the embedded SQLite database"),
		store:      fs.String("store", StoreDefault, `"sqlite" or a PostgreSQL URL (postgres://user@host:5432/db)`),
		kafka:      fs.String("kafka", "", "Kafka seed brokers, comma-separated (cluster mode; empty: in-process streams)"),
		redis:      fs.String("redis", "", "Redis address host:port or redis:// URL (cluster mode; empty: in-process limiter)"),
		nodeID:     fs.String("node-id", "", "this node's name in the cluster (default: the host name)"),
		logFormat:  fs.String("log-format", LogFormatDefault, "log format: text or json"),
		logLevel:   fs.String("log-level", LogLevelDefault, "log level: debug, info, warn or error"),
		shutdown:   fs.Duration("shutdown-timeout", ShutdownTimeoutDefault, "bound on draining in-flight work at shutdown"),
		bloomPerHour: fs.Int("receipt-bloom-per-hour", ReceiptBloomPerHourDefault,
			"distinct receipts an hour the receipt Bloom filter is sized for (~141 bytes each)"),
		maxConns: fs.Int("max-connections", 0,
			"HTTP connections open at once; the next wait in the kernel backlog (0: half the open-file limit)"),
		insecureDev: fs.Bool("insecure-dev", false,
			"start without WAMUX_SECRET_KEY, keeping a generated key in secret.key in the data directory (development only)"),
	}
	fs.Usage = func() {
		fmt.Fprintln(out, "usage: wamux serve [flags]")
		fmt.Fprintln(out, "\nRuns the gateway. Precedence: flags > WAMUX_* environment > config file > defaults.")
		fmt.Fprintln(out, "Secrets have no flags: WAMUX_API_KEYS (comma-separated, each key[:scope+…]), WAMUX_APP_SECRET, WAMUX_VERIFY_TOKEN, WAMUX_SECRET_KEY,")
		fmt.Fprintln(out, "or the file's api_keys, app_secret, verify_token, secret_key. Every WAMUX_* variable and file key: docs/configuration.md.")
		fmt.Fprintln(out, "\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return f, nil
}

// configPath is the configuration file to read: --config, else
// WAMUX_CONFIG, else "" for none.
func (f *serveFlags) configPath(getenv func(string) string) string {
	if *f.configFile != "" {
		return *f.configFile
	}
	return getenv("WAMUX_CONFIG")
}

// applyTo sets the fields of the flags given explicitly: a flag's default
// must not undo what the file or the environment said.
func (f *serveFlags) applyTo(c *Config) {
	f.set.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen":
			c.Listen = *f.listen
		case "data-dir":
			c.DataDir = *f.dataDir
		case "store":
			c.Store = *f.store
		case "kafka":
			c.Kafka = *f.kafka
		case "redis":
			c.Redis = *f.redis
		case "node-id":
			c.NodeID = *f.nodeID
		case "log-format":
			c.LogFormat = *f.logFormat
		case "log-level":
			c.LogLevel = *f.logLevel
		case "shutdown-timeout":
			c.ShutdownTimeout = Duration(*f.shutdown)
		case "receipt-bloom-per-hour":
			c.ReceiptBloomPerHour = *f.bloomPerHour
		case "max-connections":
			c.MaxConnections = *f.maxConns
		case "insecure-dev":
			c.InsecureDev = *f.insecureDev
		}
	})
}

// applyEnv sets the fields whose WAMUX_* variable is set and not empty.
func applyEnv(c *Config, getenv func(string) string) error {
	env := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	env("WAMUX_LISTEN", &c.Listen)
	env("WAMUX_DATA_DIR", &c.DataDir)
	env("WAMUX_STORE", &c.Store)
	env("WAMUX_KAFKA", &c.Kafka)
	env("WAMUX_REDIS", &c.Redis)
	env("WAMUX_REDIS_PREFIX", &c.RedisPrefix)
	env("WAMUX_NODE_ID", &c.NodeID)
	env("WAMUX_APP_SECRET", &c.AppSecret)
	env("WAMUX_VERIFY_TOKEN", &c.VerifyToken)
	env("WAMUX_SECRET_KEY", &c.SecretKey)
	env("WAMUX_EVENT_ALLOW_NETWORKS", &c.EventAllowNetworks)
	env("WAMUX_PROVIDER_BASE_URLS", &c.ProviderBaseURLs)
	env("WAMUX_LOG_FORMAT", &c.LogFormat)
	env("WAMUX_LOG_LEVEL", &c.LogLevel)
	if v := getenv("WAMUX_API_KEYS"); v != "" {
		c.APIKeys = splitList(v)
	}
	if v := getenv("WAMUX_SHUTDOWN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("WAMUX_SHUTDOWN_TIMEOUT: %w", err)
		}
		c.ShutdownTimeout = Duration(d)
	}
	if v := getenv("WAMUX_RECEIPT_BLOOM_PER_HOUR"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("WAMUX_RECEIPT_BLOOM_PER_HOUR must be a whole number, got %q", v)
		}
		c.ReceiptBloomPerHour = n
	}
	if v := getenv("WAMUX_MAX_CONNECTIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("WAMUX_MAX_CONNECTIONS must be a whole number, got %q", v)
		}
		c.MaxConnections = n
	}
	return nil
}

// check validates the assembled configuration and each runtime setting
// on its own; the gateway checks the settings together with the stored
// ones when it applies them.
func (c Config) check() error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	if err := settings.Check(c.Settings); err != nil {
		return fmt.Errorf("invalid configuration: config file %s: settings: %w", c.File, err)
	}
	return nil
}

// readFile decodes the YAML file at path over c; unknown keys are an error.
func readFile(path string, c *Config) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, nameKeys(hideValues(err), raw))
	}
	// Decode reads one document: the keys of any after a "---", typos
	// included, would be silently ignored.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: must hold one YAML document; a \"---\" line starts another, whose keys would be ignored", path)
	}
	return nil
}

// lineNumber is how the yaml package starts each line of a *yaml.TypeError.
var lineNumber = regexp.MustCompile(`^line (\d+): `)

// nameKeys adds to each line of a type error the key its value belongs to
// ("line 3: receipt_bloom_per_hour: cannot unmarshal …"): yaml names only
// the line and the types, and with the value hidden the key is what tells
// the operator which setting is wrong.
func nameKeys(err error, raw []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := keysByLine(raw)
	lines := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		lines[i] = e
		m := lineNumber.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if key, ok := keys[n]; ok {
			lines[i] = m[0] + key + ": " + e[len(m[0]):]
		}
	}
	return &yaml.TypeError{Errors: lines}
}

// keysByLine maps each line of the file's first document to the path of
// the innermost key whose value is on it ("settings.gap_timeout"; an item
// of a list takes the list's key).
func keysByLine(raw []byte) map[int]string {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil
	}
	keys := map[int]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if path != "" {
			keys[n.Line] = path
		}
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + p
				}
				keys[k.Line] = p
				walk(v, p)
			}
		}
	}
	walk(&doc, "")
	return keys
}

// quotedValue is how the yaml package quotes a value in its errors ("cannot
// unmarshal !!str `s3cretKEY9` into []string", "cannot decode !!str `…`
// as a !!int"): from the first backquote to the last, so a backquote
// inside the value does not end the match early.
var quotedValue = regexp.MustCompile("(?s)`.*`")

// hideValues keeps a YAML error's line and types but not the value it
// quotes: the file holds the API keys and secrets, and api_keys written
// as one string (as WAMUX_API_KEYS is) would print the key, or its first
// characters, to stderr and, on SIGHUP, to the logs.
func hideValues(err error) error {
	const hidden = "(value hidden)"
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			lines[i] = quotedValue.ReplaceAllLiteralString(e, hidden)
		}
		return &yaml.TypeError{Errors: lines}
	}
	if msg := err.Error(); strings.Contains(msg, "`") {
		return &hiddenValueError{msg: quotedValue.ReplaceAllLiteralString(msg, hidden), err: err}
	}
	return err
}

// hiddenValueError prints without the value but keeps the cause for
// errors.Is and errors.As.
type hiddenValueError struct {
	msg string
	err error
}

func (e *hiddenValueError) Error() string { return e.msg }
func (e *hiddenValueError) Unwrap() error { return e.err }

// ReadSettings re-reads the file at path and returns its runtime settings
// (empty when it has none). The whole file must still parse, so a typo
// made while editing it is reported rather than half applied. Static keys
// (listen, store, …) take effect only at the next start.
func ReadSettings(path string) (map[string]string, error) {
	c := Default()
	if err := readFile(path, &c); err != nil {
		return nil, err
	}
	if c.Settings == nil {
		c.Settings = map[string]string{}
	}
	return c.Settings, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// redactURL hides every password a store setting may carry before it is
// shown anywhere: the URL's own (postgres://app:pw@db), query parameters
// libpq and pgx read as one (?password=, ?sslpassword=), and the
// key=value form (host=db password=pw). A URL that does not parse keeps
// only its scheme: where a password ends is then a guess.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !urlScheme.MatchString(scheme) {
		return keyValuePassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if credentialsPastAuthority(rest) {
		return scheme + "://(URL hidden: percent-encode '/', '?' and '#' in a password)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return scheme + "://(unparsable URL hidden)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	u.RawQuery = redactQuery(u.RawQuery)
	return u.String()
}

// credentialsPastAuthority tells whether the credentials of a URL (the
// text after "://") may run past where url.Parse ends its authority: an
// unescaped '/', '?' or '#' in a password ends it early, and the parsed
// URL then shows the password's start as a port ("app:12") and its rest
// as a path, query or fragment. That is the case when a ':' and one of
// those characters come before the last '@'. A valid URL with an '@' in
// its query and a port (db:5432/w?application_name=a@b) is then shown
// without its host too; only the shown text changes, not the store used.
func credentialsPastAuthority(rest string) bool {
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return false
	}
	cred := rest[:at]
	return strings.Contains(cred, ":") && strings.ContainsAny(cred, "/?#")
}

// urlScheme is RFC 3986's scheme: text before "://" that is not one is
// a key=value string holding "://" (in a password, say).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// keyValuePassword finds password=… in a key=value connection string:
// quoted (with libpq's \' and \\ inside, or unterminated, to the end) or
// not.
var keyValuePassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*(?:'|$)|\S*)`)

// redactQuery masks the value of every query parameter whose name, once
// unescaped, mentions a password, and of any whose name does not unescape.
func redactQuery(q string) string {
	if q == "" {
		return q
	}
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		key, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(key)
		if err != nil || strings.Contains(strings.ToLower(name), "password") {
			parts[i] = key + "=xxxxx"
		}
	}
	return strings.Join(parts, "&")
}

// RedactedStore is the store setting safe to log.
func (c Config) RedactedStore() string { return redactURL(c.Store) }
