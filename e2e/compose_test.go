package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of a docker compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]any    `yaml:"depends_on"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// TestDeployClusterCompose: deploy/docker-compose.cluster.yml starts a
// cluster the gateway accepts: three nodes with distinct node ids, each
// given all three backends (a PostgreSQL store, Kafka, Redis) under
// variables the configuration reads, a simulator started with flags
// `wamux sim` has and sending webhooks to a node, a Prometheus scraping
// every node, and every file it mounts present.
func TestDeployClusterCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "docker-compose.cluster.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.cluster.yml: %v", err)
	}
	for _, name := range []string{"kafka", "postgres", "redis", "sim", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no %s service", name)
		}
	}
	configSrc, err := os.ReadFile(filepath.Join(repoRoot, "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	nodeIDs := map[string]bool{}
	var nodes []string
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "wamux") {
			continue
		}
		nodes = append(nodes, name)
		env := s.Environment
		id := env["WAMUX_NODE_ID"]
		if id == "" || nodeIDs[id] {
			t.Errorf("%s: node id %q missing or shared with another node", name, id)
		}
		nodeIDs[id] = true
		if !strings.HasPrefix(env["WAMUX_STORE"], "postgres://") || env["WAMUX_KAFKA"] == "" || env["WAMUX_REDIS"] == "" {
			t.Errorf("%s: cluster mode needs WAMUX_STORE (PostgreSQL), WAMUX_KAFKA and WAMUX_REDIS; has %v", name, env)
		}
		for k := range env {
			if !strings.Contains(string(configSrc), `"`+k+`"`) {
				t.Errorf("%s: the configuration reads no variable %s", name, k)
			}
		}
		for _, dep := range []string{"kafka", "postgres", "redis"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s does not wait for %s", name, dep)
			}
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("wamux nodes %v; want three", nodes)
	}
	slices.Sort(nodes)

	simSrc, err := os.ReadFile(filepath.Join(repoRoot, "cmd", "wamux", "sim.go"))
	if err != nil {
		t.Fatal(err)
	}
	simCmd := c.Services["sim"].Command
	if len(simCmd) == 0 || simCmd[0] != "sim" {
		t.Fatalf("sim service runs %v; want wamux sim", simCmd)
	}
	for i, arg := range simCmd {
		if flag, ok := strings.CutPrefix(arg, "--"); ok && !strings.Contains(string(simSrc), `"`+flag+`"`) {
			t.Errorf("sim service passes --%s, which wamux sim does not have", flag)
		}
		if arg == "--webhook-url" && (i+1 >= len(simCmd) || !slices.ContainsFunc(nodes, func(n string) bool {
			return strings.HasPrefix(simCmd[i+1], "http://"+n+":8080/webhook")
		})) {
			t.Errorf("sim webhooks go to %v; want a node's /webhook", simCmd[i+1:])
		}
	}

	prom, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "prometheus.cluster.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !strings.Contains(string(prom), `"`+n+`:8080"`) {
			t.Errorf("prometheus.cluster.yml does not scrape %s", n)
		}
	}
	mount := regexp.MustCompile(`^(\./[^:]+):`)
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			if m := mount.FindStringSubmatch(v); m != nil {
				if _, err := os.Stat(filepath.Join(repoRoot, "deploy", m[1])); err != nil {
					t.Errorf("%s mounts %s, which is missing: %v", name, m[1], err)
				}
			}
		}
	}
}
