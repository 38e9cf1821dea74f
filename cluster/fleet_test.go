package cluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wamux/wamux/chaos"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/postgres/pgtest"
)

const (
	apiKey    = "cluster-key-0123456789abcdef"
	appSecret = "cluster-app-secret-0123456789"
)

// fleet is a cluster of `wamux serve` children on one kfake cluster (3
// brokers on TCP), one PostgreSQL schema and one Redis key prefix.
type fleet struct {
	t      *testing.T
	bin    string
	kafka  *kfake.Cluster
	store  string // the store URL, search_path naming the schema
	schema string
	env    []string
	args   []string

	mu    sync.Mutex
	nodes []*node
	rr    int
}

// node is one member; gw is nil while it is down.
type node struct {
	name string
	cfg  chaos.GatewayConfig
	gw   *chaos.Gateway
}

// buildBinary builds wamux without the race detector (the children's
// speed decides how much a run covers).
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wamux")
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", bin, "./cmd/wamux")
	build.Dir = filepath.Dir(filepath.Dir(file))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// newFleet prepares the shared backends; nodes start with start.
func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	dsn := pgtest.DSN()
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES is empty: cluster mode needs PostgreSQL")
	}
	redisURL := os.Getenv(redistest.Env)
	_, prefix := redistest.Client(t) // skips when WAMUX_TEST_REDIS is empty
	kc, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(kc.Close)
	schema := pgtest.Schema(t, dsn, "wamux_cluster_")
	// Migrated once here, so the nodes start on a ready schema.
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("migrate the schema: %v", err)
	}
	st.Close()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	f := &fleet{t: t, bin: buildBinary(t), kafka: kc, store: dsn + sep + "search_path=" + schema, schema: schema,
		env: []string{"WAMUX_API_KEYS=" + apiKey, "WAMUX_SECRET_KEY=" + base64.StdEncoding.EncodeToString(key),
			"WAMUX_APP_SECRET=" + appSecret, "WAMUX_PROVIDER_BASE_URLS=http://127.0.0.1", "WAMUX_LOG_LEVEL=info",
			"WAMUX_REDIS_PREFIX=" + prefix},
		args: []string{"--kafka", strings.Join(kc.ListenAddrs(), ","), "--redis", redisURL},
	}
	dir := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("node%d", i+1)
		f.nodes = append(f.nodes, &node{name: name, cfg: chaos.GatewayConfig{Bin: f.bin, DataDir: filepath.Join(dir, name),
			Store: f.store, Env: f.env, Args: append(append([]string{}, f.args...), "--node-id", name)}})
	}
	t.Cleanup(func() {
		for _, nd := range f.nodes {
			if gw := f.gateway(nd); gw != nil {
				gw.Kill()
			}
		}
	})
	return f
}

func (f *fleet) gateway(nd *node) *chaos.Gateway {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nd.gw
}

// start starts node i.
func (f *fleet) start(ctx context.Context, i int) {
	f.t.Helper()
	nd := f.nodes[i]
	gw, err := chaos.StartGateway(ctx, nd.cfg)
	if err != nil {
		f.t.Fatalf("start %s: %v", nd.name, err)
	}
	f.mu.Lock()
	nd.gw = gw
	f.mu.Unlock()
}

// kill ends node i with SIGKILL.
func (f *fleet) kill(i int) {
	f.mu.Lock()
	nd := f.nodes[i]
	gw := nd.gw
	nd.gw = nil
	f.mu.Unlock()
	gw.Kill()
	f.checkNoPanic(nd.name, gw)
}

// stop ends node i with SIGTERM and checks it exits cleanly.
func (f *fleet) stop(i int) {
	f.mu.Lock()
	nd := f.nodes[i]
	gw := nd.gw
	nd.gw = nil
	f.mu.Unlock()
	if err := gw.Stop(); err != nil {
		f.t.Errorf("%s did not stop cleanly: %v\n%s", nd.name, err, tail(gw.Stderr()))
	}
	f.checkNoPanic(nd.name, gw)
}

func (f *fleet) checkNoPanic(name string, gw *chaos.Gateway) {
	if s := gw.Stderr(); strings.Contains(s, "panic") || strings.Contains(s, "DATA RACE") {
		f.t.Errorf("%s panicked:\n%s", name, tail(s))
	}
}

// next returns a running gateway, round robin; nil when none runs.
func (f *fleet) next() *chaos.Gateway {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range f.nodes {
		f.rr++
		if gw := f.nodes[f.rr%len(f.nodes)].gw; gw != nil {
			return gw
		}
	}
	return nil
}

// webhookProxy forwards each POST to a running node, round robin, as a
// load balancer in front of the fleet would; 503 when none answers.
func (f *fleet) webhookProxy() *httptest.Server {
	client := &http.Client{Timeout: 15 * time.Second}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		gw := f.next()
		if gw == nil {
			http.Error(w, "no node", http.StatusServiceUnavailable)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, gw.Base+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		res, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(out)
	}))
	f.t.Cleanup(srv.Close)
	return srv
}

// holders reads who holds each partition from the store's lease table.
func (f *fleet) holders(ctx context.Context) (map[int]string, error) {
	conn, err := pgx.Connect(ctx, f.store)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT partition_id, holder FROM partition_leases")
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for rows.Next() {
		var p int
		var h string
		if err := rows.Scan(&p, &h); err != nil {
			return nil, err
		}
		out[p] = h
	}
	return out, rows.Err()
}

func tail(s string) string {
	const n = 6000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
