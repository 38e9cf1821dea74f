package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsWithNothingGiven(t *testing.T) {
	c, err := Load(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "data" || c.Store != "sqlite" {
		t.Fatalf("defaults = %+v", c)
	}
	if time.Duration(c.ShutdownTimeout) != ShutdownTimeoutDefault {
		t.Fatalf("shutdown timeout = %v", time.Duration(c.ShutdownTimeout))
	}
}

func TestPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	file := "listen: 127.0.0.1:7000\ndata_dir: /from/file\nlog_format: json\nshutdown_timeout: 3s\napi_keys: [filekey-123]\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"WAMUX_DATA_DIR": "/from/env", "WAMUX_LISTEN": "127.0.0.1:7001", "WAMUX_API_KEYS": "envkey-111, envkey-222"})
	c, err := Load([]string{"--config", path, "--listen", "127.0.0.1:7002"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7002" {
		t.Errorf("listen = %q, want the flag's", c.Listen)
	}
	if c.DataDir != "/from/env" {
		t.Errorf("data_dir = %q, want the environment's", c.DataDir)
	}
	if c.LogFormat != "json" || time.Duration(c.ShutdownTimeout) != 3*time.Second {
		t.Errorf("file values lost: %+v", c)
	}
	if len(c.APIKeys) != 2 || c.APIKeys[0] != "envkey-111" || c.APIKeys[1] != "envkey-222" {
		t.Errorf("api keys = %q", c.APIKeys)
	}
}

func TestFlagDefaultDoesNotOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", path, "--data-dir", "x"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" {
		t.Fatalf("listen = %q; an unset flag's default replaced the file's value", c.Listen)
	}
}

func TestRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.yaml")
	os.WriteFile(unknown, []byte("lisen: x\n"), 0o600)
	badDur := filepath.Join(dir, "dur.yaml")
	os.WriteFile(badDur, []byte("shutdown_timeout: soon\n"), 0o600)
	cases := map[string][]string{
		"unknown key":    {"--config", unknown},
		"bad duration":   {"--config", badDur},
		"bad store":      {"--store", "mysql://x"},
		"bad log format": {"--log-format", "xml"},
		"missing file":   {"--config", filepath.Join(dir, "nope.yaml")},
		"stray argument": {"extra"},
		"zero shutdown":  {"--shutdown-timeout", "0s"},
		"short api key":  nil,
	}
	for name, args := range cases {
		env := envOf(nil)
		if name == "short api key" {
			env = envOf(map[string]string{"WAMUX_API_KEYS": "abc"})
		}
		if _, err := Load(args, env, io.Discard); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	_, err := Load([]string{"--help"}, envOf(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"-listen", "-data-dir", "-config", "-store", "-kafka", "-redis", "WAMUX_API_KEYS", "WAMUX_CONFIG"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("help does not mention %s", f)
		}
	}
}

func TestRedactStorePassword(t *testing.T) {
	c := Config{Store: "postgres://app:hunter2@db:5432/wamux"}
	if got := c.RedactedStore(); strings.Contains(got, "hunter2") {
		t.Fatalf("redacted store still has the password: %s", got)
	}
}

// TestRedactStorePasswordAnywhere: a PostgreSQL URL may carry its
// password in the query (?password=, ?sslpassword=, as libpq and pgx
// accept), a password may hold '@', '/' or '?', and a store may be given
// in the key=value form. None of it shows in the "wamux started" line or
// an error; the host still does wherever the URL parses.
func TestRedactStorePasswordAnywhere(t *testing.T) {
	for _, tc := range []struct {
		store     string
		showsHost bool
	}{
		{"postgres://app@db:5432/wamux?password=hunter2", true},
		{"postgres://db/wamux?sslmode=require&password=hunter2&application_name=w", true},
		{"postgresql://app@db/wamux?sslpassword=hunter2", true},
		{"postgres://app@db/wamux?PASSWORD=hunter2", true},
		{"postgres://app@db/wamux?pass%77ord=hunter2", true},
		{"postgres://db/wamux?password=hun@ter2", true},
		{"postgres://app:hun@ter2@db/wamux", true},
		{"postgres://app:hunter2@db/wamux?password=hunter2", true},
		{"postgres://app@db/wamux?password=hunter2%zz", true},
		{"postgres://app@db/wamux?x%zz=hunter2", true},
		{"postgres://app:hunter2@db:port/wamux", false},
		{"postgres://app:hun/ter2@db/wamux", false},
		{"postgres://app:hun?ter2@db/wamux", false},
		{"host=db password=hunter2 dbname=wamux", true},
		{"host=db password='hun ter2' dbname=wamux", true},
	} {
		got := Config{Store: tc.store}.RedactedStore()
		if strings.Contains(got, "ter2") {
			t.Errorf("%s → %s: the password shows", tc.store, got)
		}
		if tc.showsHost && !strings.Contains(got, "db") {
			t.Errorf("%s → %s: the host is gone", tc.store, got)
		}
		mysql := strings.Replace(tc.store, "postgres", "mysql", 1)
		if _, err := Load([]string{"--store", mysql}, envOf(nil), io.Discard); err == nil || strings.Contains(err.Error(), "ter2") {
			t.Errorf("--store %s: Validate error %v", mysql, err)
		}
	}
}

func TestReceiptBloomPerHour(t *testing.T) {
	c, err := Load(nil, envOf(nil), io.Discard)
	if err != nil || c.ReceiptBloomPerHour != ReceiptBloomPerHourDefault {
		t.Fatalf("default = %d (%v), want %d", c.ReceiptBloomPerHour, err, ReceiptBloomPerHourDefault)
	}
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	if err := os.WriteFile(path, []byte("receipt_bloom_per_hour: 1000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"file", []string{"--config", path}, nil, 1_000_000},
		{"environment over file", []string{"--config", path}, map[string]string{"WAMUX_RECEIPT_BLOOM_PER_HOUR": "3000000"}, 3_000_000},
		{"flag over environment", []string{"--config", path, "--receipt-bloom-per-hour", "500000"},
			map[string]string{"WAMUX_RECEIPT_BLOOM_PER_HOUR": "3000000"}, 500_000},
	} {
		c, err := Load(tc.args, envOf(tc.env), io.Discard)
		if err != nil || c.ReceiptBloomPerHour != tc.want {
			t.Errorf("%s: %d (%v), want %d", tc.name, c.ReceiptBloomPerHour, err, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"zero":           {[]string{"--receipt-bloom-per-hour", "0"}, nil},
		"negative":       {[]string{"--receipt-bloom-per-hour", "-5"}, nil},
		"above the max":  {[]string{"--receipt-bloom-per-hour", "50000001"}, nil},
		"not a number":   {nil, map[string]string{"WAMUX_RECEIPT_BLOOM_PER_HOUR": "lots"}},
		"fraction (env)": {nil, map[string]string{"WAMUX_RECEIPT_BLOOM_PER_HOUR": "1.5"}},
	} {
		if _, err := Load(tc.args, envOf(tc.env), io.Discard); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
}

// TestFileErrorsShowNoValue: the file holds the API keys and secrets, and
// its errors go to stderr and the logs (SIGHUP). A value of the wrong
// shape (api_keys written as one string, as WAMUX_API_KEYS is) or with a
// tag it does not fit is reported by line and type, never quoted, not
// even its first characters.
func TestFileErrorsShowNoValue(t *testing.T) {
	const secret = "s3cretKEY9`x" // a backquote must not end the hiding early
	for name, file := range map[string]string{
		"short key as a string": "api_keys: s3cretKEY9\n",
		"long key as a string":  "api_keys: " + secret + "-and-more-of-it\n",
		"with a backquote":      "api_keys: '" + secret + "'\n",
		"int tag":               "app_secret: !!int " + secret + "\n",
		"float tag":             "verify_token: !!float " + secret + "\n",
		"two errors":            "api_keys: " + secret + "\nreceipt_bloom_per_hour: " + secret + "\n",
		"in a settings section": "settings:\n  gap_timeout: !!int " + secret + "\n",
	} {
		path := filepath.Join(t.TempDir(), "wamux.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
		if err == nil {
			t.Errorf("%s: Load accepted it", name)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "s3c") {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
		if !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), "cannot") {
			t.Errorf("%s: the error no longer says what is wrong: %v", name, err)
		}
		if _, err := ReadSettings(path); err == nil || strings.Contains(err.Error(), "s3c") {
			t.Errorf("%s: ReadSettings error %v", name, err)
		}
	}
}

// TestRedactStorePasswordEndingAuthority: an unescaped '/', '?' or '#' in
// a password ends the URL's authority early for url.Parse, which then
// reads the password's start as a port ("app:12") and its rest as a path,
// query or fragment; none of it may show. A key=value store whose password
// holds "://" or an escaped quote is no URL either.
func TestRedactStorePasswordEndingAuthority(t *testing.T) {
	for _, store := range []string{
		"postgres://app:12/ter2@db/wamux",
		"postgres://app:/ter2@db/wamux",
		"postgres://app:5432?ter2@db/wamux",
		"postgres://app:99#ter2@db/wamux",
		"postgres://app:hun@1/ter2@db/wamux",
		"postgresql://app:7/ter2@db:5432/wamux?sslmode=require",
		"host=db password=ter2://x dbname=wamux",
		`host=db password='hun\'ter2' dbname=wamux`,
		"host=db password='hun ter2",
	} {
		got := Config{Store: store}.RedactedStore()
		if strings.Contains(got, "ter2") {
			t.Errorf("%s → %s: the password shows", store, got)
		}
	}
}

// TestClusterTakesAllThreeOrNone: Kafka, Redis and a PostgreSQL store
// make cluster mode together; a part of them is refused at start with the
// missing parts named, since a node on its own SQLite file or without the
// shared limiter would break the fleet's guarantees silently.
func TestClusterTakesAllThreeOrNone(t *testing.T) {
	pg := "postgres://postgres@127.0.0.1:5432/test"
	for _, tc := range []struct {
		args    []string
		wantErr string // "" accepts
		cluster bool
	}{
		{nil, "", false},
		{[]string{"--store", pg}, "", false},
		{[]string{"--store", pg, "--kafka", "k1:9092,k2:9092", "--redis", "127.0.0.1:6379", "--node-id", "node-a"}, "", true},
		{[]string{"--store", pg, "--kafka", "k1:9092", "--redis", "redis://:pw@r:6379/0"}, "", true},
		{[]string{"--kafka", "k1:9092"}, "missing --store postgres://…, --redis", false},
		{[]string{"--store", pg, "--redis", "r:6379"}, "missing --kafka", false},
		{[]string{"--store", pg, "--kafka", "k1:9092"}, "missing --redis", false},
		{[]string{"--store", pg, "--kafka", "k1", "--redis", "r:6379"}, "host:port seed brokers", false},
		{[]string{"--store", pg, "--kafka", "k1:9092", "--redis", "nohost"}, "redis must be host:port", false},
		{[]string{"--node-id", "bad name"}, "node_id must be", false},
	} {
		c, err := Load(tc.args, envOf(nil), io.Discard)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			} else if c.Cluster() != tc.cluster {
				t.Errorf("%v: Cluster() = %v, want %v", tc.args, c.Cluster(), tc.cluster)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: err = %v, want one containing %q", tc.args, err, tc.wantErr)
		}
	}
	c, err := Load([]string{"--insecure-dev", "--store", pg, "--kafka", "k1:9092", "--redis", "r:6379"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSecretKey(); err == nil || !strings.Contains(err.Error(), "required in cluster mode") {
		t.Errorf("cluster mode without a secret key, --insecure-dev: CheckSecretKey = %v", err)
	}
	c, err = Load(nil, envOf(map[string]string{"WAMUX_NODE_ID": "n-2"}), io.Discard)
	if err != nil || c.NodeID != "n-2" {
		t.Errorf("WAMUX_NODE_ID: NodeID = %q, err %v", c.NodeID, err)
	}
}
