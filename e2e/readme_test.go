package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
)

// docLines returns a document of the repository, by its path from the
// root, as lines.
func docLines(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(raw), "\n")
}

// The documents whose content these tests hold to the gateway.
const (
	readmeDoc = "README.md"
	configDoc = "docs/configuration.md"
	apiDoc    = "docs/api.md"
)

// section returns the lines of document doc after the heading line
// `heading` up to the next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) []string {
	t.Helper()
	lines := docLines(t, doc)
	level := strings.Index(heading, " ")
	for i, l := range lines {
		if l != heading {
			continue
		}
		var out []string
		for _, m := range lines[i+1:] {
			if n := strings.Index(m, " "); n > 0 && n <= level && strings.Trim(m[:n], "#") == "" {
				break
			}
			out = append(out, m)
		}
		return out
	}
	t.Fatalf("%s has no heading %q", doc, heading)
	return nil
}

// codeBlocks returns the fenced code blocks of lines whose info string is
// lang, each as its lines.
func codeBlocks(lines []string, lang string) [][]string {
	var blocks [][]string
	var cur []string
	in, want := false, false
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			if in {
				if want {
					blocks = append(blocks, cur)
				}
				in, cur = false, nil
				continue
			}
			in, want = true, strings.TrimPrefix(l, "```") == lang
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return blocks
}

// tableRows returns the cells of the rows of the first markdown table in
// lines, header and separator left out.
func tableRows(lines []string) [][]string {
	var rows [][]string
	header := true
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			if !header {
				break // the end of the first table
			}
			continue
		}
		if header { // the header line; the separator follows
			header = false
			continue
		}
		if strings.HasPrefix(l, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// spans returns the code spans of a table cell: "`a`, `b`" → a, b.
func spans(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestConfigDocSettingsTable: every runtime setting is in the /v1/config
// table of docs/configuration.md once, with the default the gateway really
// starts with, and the table names no key the gateway does not know.
func TestConfigDocSettingsTable(t *testing.T) {
	rows := tableRows(section(t, configDoc, "## Runtime settings (`/v1/config`)"))
	if len(rows) < 8 {
		t.Fatalf("only %d rows in the settings table of %s", len(rows), configDoc)
	}
	a := startApp(t)
	var got struct {
		Settings map[string]string `json:"settings"`
	}
	doJSON(t, a, "GET", "/v1/config", "", &got)
	seen := map[string]bool{}
	for _, r := range rows {
		keys, defaults := spans(r[0]), spans(r[1])
		if len(defaults) == 1 {
			for len(defaults) < len(keys) {
				defaults = append(defaults, defaults[0])
			}
		}
		if len(keys) == 0 || len(keys) != len(defaults) {
			t.Errorf("settings row %q: %d keys, %d defaults", r[0], len(keys), len(defaults))
			continue
		}
		for i, k := range keys {
			if seen[k] {
				t.Errorf("the settings table lists %s twice", k)
			}
			seen[k] = true
			v, ok := got.Settings[k]
			switch {
			case !ok:
				t.Errorf("the settings table lists %s, which GET /v1/config does not have", k)
			case v != defaults[i]:
				t.Errorf("%s says %s defaults to %q; a fresh gateway has %q", configDoc, k, defaults[i], v)
			}
		}
	}
	for k := range got.Settings {
		if !seen[k] {
			t.Errorf("setting %s is missing from the settings table of %s", k, configDoc)
		}
	}
}

// configSample is, per YAML key of the configuration table, a
// valid value unlike the default, to see that the flag, the environment
// variable and the YAML key the table names each set it.
var configSample = map[string]string{
	"listen":                 "127.0.0.1:9",
	"data_dir":               "elsewhere",
	"store":                  "postgres://u@db:5432/wamux",
	"kafka":                  "k1:9092",
	"redis":                  "r1:6379",
	"redis_prefix":           "fleet2.",
	"api_keys":               "first-key-0001",
	"app_secret":             "an-app-secret",
	"verify_token":           "a-verify-token",
	"secret_key":             "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
	"event_allow_networks":   "127.0.0.0/8",
	"provider_base_urls":     "https://graph.facebook.com,http://127.0.0.1:8090",
	"log_format":             "json",
	"log_level":              "debug",
	"shutdown_timeout":       "7s",
	"receipt_bloom_per_hour": "1234",
	"max_connections":        "500",
	"node_id":                "node-b",
}

// clusterCompanions are, for a key of cluster mode, the environment that
// completes it (cluster mode takes a PostgreSQL store, Kafka and Redis
// together), leaving the key itself to the channel under test.
func clusterCompanions(key string) func(string) string {
	all := map[string]string{"WAMUX_STORE": configSample["store"], "WAMUX_KAFKA": configSample["kafka"], "WAMUX_REDIS": configSample["redis"]}
	switch key {
	case "kafka":
		delete(all, "WAMUX_KAFKA")
	case "redis":
		delete(all, "WAMUX_REDIS")
	default:
		return func(string) string { return "" }
	}
	return func(name string) string { return all[name] }
}

// configField renders the field of c that a YAML key fills, as the
// configuration table writes a default.
func configField(c config.Config, key string) string {
	switch key {
	case "listen":
		return c.Listen
	case "data_dir":
		return c.DataDir
	case "store":
		return c.Store
	case "kafka":
		return c.Kafka
	case "redis":
		return c.Redis
	case "redis_prefix":
		return c.RedisPrefix
	case "api_keys":
		return strings.Join(c.APIKeys, ",")
	case "app_secret":
		return c.AppSecret
	case "verify_token":
		return c.VerifyToken
	case "secret_key":
		return c.SecretKey
	case "event_allow_networks":
		return c.EventAllowNetworks
	case "provider_base_urls":
		return c.ProviderBaseURLs
	case "log_format":
		return c.LogFormat
	case "log_level":
		return c.LogLevel
	case "shutdown_timeout":
		return time.Duration(c.ShutdownTimeout).String()
	case "receipt_bloom_per_hour":
		return fmt.Sprint(c.ReceiptBloomPerHour)
	case "max_connections":
		return fmt.Sprint(c.MaxConnections)
	case "node_id":
		if c.NodeID == "" {
			return "the host name"
		}
		return c.NodeID
	case "settings":
		if len(c.Settings) == 0 {
			return ""
		}
		return fmt.Sprint(c.Settings)
	}
	return "?" + key
}

// TestConfigDocTable: each row of the configuration table of
// docs/configuration.md holds: the default is what config.Default has, and
// the YAML key, the flag and the environment variable it names each set
// that value (a "—" flag is refused); every YAML key the config file takes
// is a row.
func TestConfigDocTable(t *testing.T) {
	rows := tableRows(section(t, configDoc, "## Flags, environment and config file"))
	if len(rows) < 10 {
		t.Fatalf("only %d rows in the configuration table of %s", len(rows), configDoc)
	}
	def := config.Default()
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) != 5 {
			t.Errorf("config row %q: %d cells, want 5", r, len(r))
			continue
		}
		key := strings.Trim(r[0], "`")
		seen[key] = true
		noEnv := clusterCompanions(key)
		want := strings.Trim(r[3], "`")
		if want == "empty" || want == "none" {
			want = ""
		}
		if got := configField(def, key); got != want {
			t.Errorf("%s: %s defaults to %q; config.Default has %q", configDoc, key, want, got)
		}
		if key == "settings" {
			continue // a map, checked by TestSettingsSection in config
		}
		sample, ok := configSample[key]
		if !ok {
			t.Errorf("config key %s has no sample value in this test", key)
			continue
		}
		// The YAML key.
		file := filepath.Join(t.TempDir(), "wamux.yaml")
		if err := os.WriteFile(file, []byte(key+": "+yamlValue(key, sample)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if c, err := config.Load([]string{"--config", file}, noEnv, io.Discard); err != nil || configField(c, key) != sample {
			t.Errorf("YAML %s: %s → %q, %v", key, sample, configField(c, key), err)
		}
		// The flag.
		switch flagName := strings.Trim(r[1], "`"); flagName {
		case "—":
			if _, err := config.Load([]string{"--" + strings.ReplaceAll(key, "_", "-"), sample}, noEnv, io.Discard); err == nil {
				t.Errorf("%s says %s has no flag, but --%s is taken", configDoc, key, strings.ReplaceAll(key, "_", "-"))
			}
		default:
			if c, err := config.Load([]string{flagName, sample}, noEnv, io.Discard); err != nil || configField(c, key) != sample {
				t.Errorf("flag %s %s → %s %q, %v", flagName, sample, key, configField(c, key), err)
			}
		}
		// The environment variable.
		if env := strings.Trim(r[2], "`"); env != "—" {
			getenv := func(name string) string {
				if name == env {
					return sample
				}
				return noEnv(name)
			}
			if c, err := config.Load(nil, getenv, io.Discard); err != nil || configField(c, key) != sample {
				t.Errorf("environment %s=%s → %s %q, %v", env, sample, key, configField(c, key), err)
			}
		}
	}
	for _, key := range yamlKeys() {
		if !seen[key] {
			t.Errorf("config file key %s is missing from the configuration table of %s", key, configDoc)
		}
	}
}

// yamlValue writes a sample as the YAML file would hold it.
func yamlValue(key, sample string) string {
	if key == "api_keys" {
		return "[" + sample + "]"
	}
	return sample
}

// yamlOf marshals v as YAML.
func yamlOf(v any) string {
	raw, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// yamlKeys are the top-level keys config.Load takes in a file: every key
// of the default configuration marshalled as YAML.
func yamlKeys() []string {
	var keys []string
	for _, l := range strings.Split(yamlOf(config.Default()), "\n") {
		if k, _, ok := strings.Cut(l, ":"); ok && k != "" && !strings.HasPrefix(k, " ") {
			keys = append(keys, k)
		}
	}
	return keys
}

// curlCommand is what the test reads of a curl line.
type curlCommand struct {
	method, url, data string
	header            http.Header
}

// shellWords splits a shell line into words: single quotes keep text as
// is, double quotes expand $NAME from env, backslash-newlines are gone.
func shellWords(line string, env map[string]string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			cur.WriteString(expand(line[i+1:i+1+j], env))
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

var shellVar = regexp.MustCompile(`\$([A-Z_]+)`)

func expand(s string, env map[string]string) string {
	return shellVar.ReplaceAllStringFunc(s, func(v string) string { return env[v[1:]] })
}

// parseCurl reads the options the documents use, the way curl does: -d
// makes a POST with Content-Type application/x-www-form-urlencoded unless
// a header says otherwise.
func parseCurl(t *testing.T, words []string) curlCommand {
	t.Helper()
	c := curlCommand{method: "GET", header: http.Header{}}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; w {
		case "-s", "-S", "-sS", "-i":
		case "-H":
			i++
			k, v, _ := strings.Cut(words[i], ":")
			c.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		case "-X":
			i++
			c.method = words[i]
		case "-d", "--data":
			i++
			c.data = words[i]
			if c.method == "GET" {
				c.method = "POST"
			}
		default:
			if strings.HasPrefix(w, "-") {
				t.Fatalf("curl option %s: not understood by this test", w)
			}
			c.url = w
		}
	}
	if c.data != "" && c.header.Get("Content-Type") == "" {
		c.header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return c
}

// curlBlock reads the first sh block of lines as a shell would: the
// variables it exports, and its curl commands.
func curlBlock(t *testing.T, lines []string) (env map[string]string, curls []curlCommand) {
	t.Helper()
	blocks := codeBlocks(lines, "sh")
	if len(blocks) == 0 {
		t.Fatal("no sh block")
	}
	// Join backslash continuations.
	var joined []string
	for _, l := range blocks[0] {
		if n := len(joined); n > 0 && strings.HasSuffix(joined[n-1], "\\") {
			joined[n-1] = strings.TrimSuffix(joined[n-1], "\\") + " " + strings.TrimSpace(l)
			continue
		}
		joined = append(joined, l)
	}
	env = map[string]string{}
	for _, l := range joined {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		words := shellWords(l, env)
		switch {
		case len(words) == 2 && words[0] == "export":
			k, v, _ := strings.Cut(words[1], "=")
			env[k] = v
		case len(words) > 0 && words[0] == "curl":
			curls = append(curls, parseCurl(t, words))
		}
	}
	return env, curls
}

// runCurls sends each curl command to the gateway at addr, the way curl
// would, with the gateway's localhost:8080 and the given other addresses
// (in URLs and bodies) replaced; every one must answer 2xx.
func runCurls(t *testing.T, doc, addr string, curls []curlCommand, replace ...string) {
	t.Helper()
	r := strings.NewReplacer(append([]string{"localhost:8080", addr}, replace...)...)
	for _, c := range curls {
		url := "http://" + r.Replace(c.url)
		req, err := http.NewRequest(c.method, url, strings.NewReader(r.Replace(c.data)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.header
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Errorf("%s: curl %s %s → %d %s", doc, c.method, c.url, res.StatusCode, body)
		}
	}
}

var simNumberFlag = regexp.MustCompile(`--number ([0-9]+):([A-Za-z0-9_-]+)`)

// TestAPIDocCurlExamples runs the curl examples of docs/api.md against a
// real gateway and the simulator they name, as curl would send them: the
// key exported there is the gateway's, the simulator has the number and
// token the text gives it, and every curl answers 2xx.
func TestAPIDocCurlExamples(t *testing.T) {
	lines := section(t, apiDoc, "## Examples")
	env, curls := curlBlock(t, lines)
	if len(curls) < 3 || env["WAMUX_API_KEYS"] == "" {
		t.Fatalf("%s examples: %d curl commands, WAMUX_API_KEYS %q", apiDoc, len(curls), env["WAMUX_API_KEYS"])
	}
	m := simNumberFlag.FindStringSubmatch(strings.Join(lines, "\n"))
	if m == nil {
		t.Fatalf("%s examples do not say which number the simulator has (--number id:token)", apiDoc)
	}
	s, err := sim.New(sim.Config{Numbers: []sim.Number{{PhoneNumberID: m[1], AccessToken: m[2]}}})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(s)
	t.Cleanup(func() { s.Close() })
	t.Cleanup(simSrv.Close)

	if env["WAMUX_PROVIDER_BASE_URLS"] == "" {
		t.Fatalf("%s examples do not allow the simulator's address (WAMUX_PROVIDER_BASE_URLS)", apiDoc)
	}
	a := startAppWith(t, func(c *config.Config) {
		c.APIKeys = []string{env["WAMUX_API_KEYS"]}
		c.ProviderBaseURLs = strings.ReplaceAll(env["WAMUX_PROVIDER_BASE_URLS"], "http://127.0.0.1:8090", simSrv.URL)
	})
	runCurls(t, apiDoc, a.Addr(), curls, "http://127.0.0.1:8090", simSrv.URL)
}

// TestConfigDocCurlExample: the PATCH /v1/config example of
// docs/configuration.md is taken by a real gateway.
func TestConfigDocCurlExample(t *testing.T) {
	_, curls := curlBlock(t, section(t, configDoc, "## Runtime settings (`/v1/config`)"))
	if len(curls) == 0 {
		t.Fatalf("%s: no curl example for /v1/config", configDoc)
	}
	for i := range curls {
		curls[i].header.Set("Authorization", "Bearer "+startAppKey)
	}
	runCurls(t, configDoc, startApp(t).Addr(), curls)
}

// TestConfigDocExampleFile: the config file docs/configuration.md shows
// loads, settings included.
func TestConfigDocExampleFile(t *testing.T) {
	blocks := codeBlocks(section(t, configDoc, "## Flags, environment and config file"), "yaml")
	if len(blocks) == 0 {
		t.Fatalf("%s shows no config file", configDoc)
	}
	file := filepath.Join(t.TempDir(), "wamux.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(blocks[0], "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load([]string{"--config", file}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("%s: the example config file: %v", configDoc, err)
	}
	if len(c.Settings) == 0 {
		t.Errorf("%s: the example config file sets no runtime settings", configDoc)
	}
}

var routeCell = regexp.MustCompile("^(GET|POST|PATCH|PUT|DELETE) (/[^ ]*)$")

// TestAPIDocRoutesServed: every route of the endpoint table of docs/api.md
// is served (a request to it is not the router's 404 or 405) and every
// answer carries X-Request-Id.
func TestAPIDocRoutesServed(t *testing.T) {
	rows := tableRows(section(t, apiDoc, "## Endpoints"))
	a := startApp(t)
	n := 0
	for _, r := range rows {
		method, path := "", ""
		for _, s := range spans(r[0]) {
			if m := routeCell.FindStringSubmatch(s); m != nil {
				method, path = m[1], m[2]
			} else if strings.HasPrefix(s, "/") && path != "" {
				// "`POST /v1/messages/{msg_id}/release`, `/drop`": a sibling.
				path = path[:strings.LastIndex(path, "/")] + s
			} else {
				t.Errorf("%s endpoint table: cannot read route %q", apiDoc, s)
				continue
			}
			n++
			target := regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "x1")
			var body io.Reader
			if method != "GET" {
				body = strings.NewReader("{}")
			}
			req, err := http.NewRequest(method, "http://"+a.Addr()+target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+startAppKey)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusMethodNotAllowed || strings.Contains(string(raw), "no such endpoint") {
				t.Errorf("%s lists %s %s; the gateway answers %d %s", apiDoc, method, path, res.StatusCode, raw)
			}
			if res.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s %s: no X-Request-Id", method, path)
			}
		}
	}
	if n < 15 {
		t.Fatalf("only %d routes read from the endpoint table of %s", n, apiDoc)
	}
}

// doJSON makes an authenticated request to a and decodes a 2xx answer.
func doJSON(t *testing.T, a *app.App, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+startAppKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(res.Body)
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	if err := json.NewDecoder(bufio.NewReader(res.Body)).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestBloomMemoryFigures: the memory docs/configuration.md and
// `wamux serve --help` state for receipt_bloom_per_hour is what the
// filter allocates.
func TestBloomMemoryFigures(t *testing.T) {
	total := receipts.BloomConfig{ExpectedPerHour: config.ReceiptBloomPerHourDefault}.MemoryBytes()
	perKey := int(math.Round(float64(total) / config.ReceiptBloomPerHourDefault))
	mb := int(math.Round(float64(total) / 1e6))
	text := strings.Join(docLines(t, configDoc), "\n")
	want := fmt.Sprintf("~%d bytes each (%d MB by default)", perKey, mb)
	if !strings.Contains(text, want) {
		t.Errorf("%s should say %q for receipt_bloom_per_hour", configDoc, want)
	}
	var help strings.Builder
	config.Load([]string{"--help"}, func(string) string { return "" }, &help)
	if want := fmt.Sprintf("~%d bytes each", perKey); !strings.Contains(help.String(), want) {
		t.Errorf("wamux serve --help should say %q:\n%s", want, help.String())
	}
}
