package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
)

// TestSIGHUPReloadsSettings: the config file's settings apply at start; an
// edited file applies on SIGHUP without a restart, logged old → new; a
// file with a bad value changes nothing and the gateway keeps running.
func TestSIGHUPReloadsSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wamux.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("settings:\n  gap_timeout: 2m\n  bloom: true\n")
	c := startChild(t, dir, "--listen", "127.0.0.1:0", "--config", file)
	pid := c.cmd.Process.Pid

	settingsNow := func() (map[string]string, error) {
		code, body, err := c.request("GET", "/v1/config", childKey, "")
		if err != nil || code != 200 {
			return nil, fmt.Errorf("GET /v1/config = %d %v %s", code, err, body)
		}
		var out struct {
			Settings map[string]string `json:"settings"`
		}
		return out.Settings, json.Unmarshal([]byte(body), &out)
	}
	waitFor := func(what string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		var s map[string]string
		testwait.ForNil(t, 20*time.Second, func() error {
			var err error
			s, err = settingsNow()
			if err == nil && ok(s) {
				return nil
			}
			return fmt.Errorf("%s: settings %v, %v\n%s", what, s, err, c.stderr.String())
		})
		return s
	}
	if s, err := settingsNow(); err != nil || s["gap_timeout"] != "2m0s" {
		t.Fatalf("the file's settings at start: %v, %v", s, err)
	}

	write("settings:\n  gap_timeout: 3m\n  bloom: false\n")
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s := waitFor("after SIGHUP", func(s map[string]string) bool { return s["gap_timeout"] == "3m0s" && s["bloom"] == "false" })
	if s["quiet_period"] != "30s" {
		t.Errorf("a key the file does not name changed: quiet_period %s", s["quiet_period"])
	}
	// The new values are visible through the API a moment before the
	// change lines and the summary reach the log: wait for the summary,
	// which comes last.
	waitLog := func(what string) {
		t.Helper()
		testwait.ForNil(t, 20*time.Second, func() error {
			if logs := c.stderr.String(); !strings.Contains(logs, what) {
				return fmt.Errorf("log lacks %q\n%s", what, logs)
			}
			return nil
		})
	}
	waitLog("configuration reloaded")
	logs := c.stderr.String()
	for _, want := range []string{"key=gap_timeout old=2m0s new=3m0s", "key=bloom old=true new=false", "configuration reloaded"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}

	// One good and one bad value: refused as a whole, logged, and the
	// process lives on.
	write("settings:\n  gap_timeout: 4m\n  quiet_period: soon\n")
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("reload on SIGHUP failed")
	if s, err := settingsNow(); err != nil || s["gap_timeout"] != "3m0s" || s["quiet_period"] != "30s" {
		t.Fatalf("a refused reload changed settings: %v, %v", s, err)
	}

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, c.stderr.String())
	}
}
