package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store/postgres/pgtest"
)

// clusterConfig is a cluster node's configuration on a fresh PostgreSQL
// schema, a fresh Redis key prefix and kafka; the test is skipped without
// PostgreSQL or Redis.
func clusterConfig(t *testing.T, kafka string) config.Config {
	t.Helper()
	dsn := pgtest.DSN()
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES is empty: cluster mode needs PostgreSQL")
	}
	_, prefix := redistest.Client(t)
	schema := pgtest.Schema(t, dsn, "wamux_app_cluster_")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", t.TempDir(), []string{testKey}
	cfg.ProviderBaseURLs = "http://127.0.0.1"
	cfg.Store = dsn + sep + "search_path=" + schema
	cfg.Kafka, cfg.Redis, cfg.RedisPrefix, cfg.NodeID = kafka, os.Getenv(redistest.Env), prefix, "n1"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func get(t *testing.T, a *app.App, path string) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + a.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// TestClusterNodeSendsAndDegrades: a node in cluster mode takes every
// partition of the receipt topic, sends an account's messages, shows
// itself as the account's owner, names
// Kafka and Redis in /readyz, and once Kafka is gone answers agent
// receipt batches 503 with a Retry-After while submissions are still
// stored.
func TestClusterNodeSendsAndDegrades(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cfg := clusterConfig(t, kc.ListenAddrs()[0])
	s, simURL := startSim(t)
	a := newApp(cfg)
	a.ClusterTimeout = 3 * time.Second
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopApp(t, a)
	code, body := get(t, a, "/readyz")
	if code != http.StatusOK || !strings.Contains(body, `"kafka":"ok"`) || !strings.Contains(body, `"redis":"ok"`) {
		t.Fatalf("/readyz = %d %s; want 200 naming kafka and redis", code, body)
	}
	call(t, a, "POST", "/v1/accounts", fmt.Sprintf(
		`{"id":"acc","phone_number_id":"555001","access_token":"tok-555001","base_url":%q,"rate_per_sec":50}`, simURL))
	call(t, a, "POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","client_seq":1,"to":"15550001","type":"text","text":{"body":"hi"}}`)
	testwait.For(t, "the message to reach the provider", 30*time.Second, func() bool {
		return s.Stats().Totals.Accepted >= 1
	})
	if body := call(t, a, "GET", "/v1/accounts/acc", ""); !strings.Contains(body, `"owner":{"node":"n1"`) {
		t.Fatalf("GET /v1/accounts/acc = %s; want owner node n1, the only node", body)
	}

	kc.Close()
	req, _ := http.NewRequest("POST", "http://"+a.Addr()+"/v1/receipts:batch", strings.NewReader(
		fmt.Sprintf(`{"account_id":"acc","receipts":[{"message_id":"wamid.x","type":"delivered","event_time":%d}]}`, time.Now().UnixMilli())))
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("receipts batch without Kafka = %d (Retry-After %q) %s; want 503 with a Retry-After", res.StatusCode, res.Header.Get("Retry-After"), raw)
	}
	if code, body := get(t, a, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"kafka":"unavailable"`) {
		t.Fatalf("/readyz without Kafka = %d %s; want 503 naming kafka", code, body)
	}
	call(t, a, "POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","client_seq":2,"to":"15550001","type":"text","text":{"body":"still"}}`)
}

// TestClusterStartNamesUnreachableKafka: with no broker at the Kafka
// address the start fails within its bound, naming Kafka.
func TestClusterStartNamesUnreachableKafka(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	addr := kc.ListenAddrs()[0]
	kc.Close() // nothing listens there any more
	cfg := clusterConfig(t, addr)
	a := newApp(cfg)
	a.ClusterTimeout = 2 * time.Second
	began := time.Now()
	err = a.Start(context.Background())
	if err == nil {
		stopApp(t, a)
		t.Fatal("started without Kafka")
	}
	if !strings.Contains(err.Error(), "kafka "+addr) || time.Since(began) > 10*time.Second {
		t.Fatalf("start without Kafka: %v after %s; want an error naming kafka %s within the bound", err, time.Since(began), addr)
	}
}
