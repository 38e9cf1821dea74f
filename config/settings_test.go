package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettingsSection: the file's settings map is read at Load (values of
// any YAML scalar type become text) and again by ReadSettings, which sees
// edits made since; a file that no longer parses is an error, not a
// partial change.
func TestSettingsSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("listen: 127.0.0.1:9999\nsettings:\n  gap_timeout: 2m\n  bloom: false\n  p2_max_depth: 5000\n")
	c, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != path || c.Settings["gap_timeout"] != "2m" || c.Settings["bloom"] != "false" || c.Settings["p2_max_depth"] != "5000" {
		t.Fatalf("loaded: file %q settings %v", c.File, c.Settings)
	}

	write("listen: 127.0.0.1:9999\nsettings:\n  gap_timeout: 3m\n")
	got, err := ReadSettings(path)
	if err != nil || len(got) != 1 || got["gap_timeout"] != "3m" {
		t.Fatalf("re-read: %v, %v", got, err)
	}
	write("listen: 127.0.0.1:9999\n")
	if got, err := ReadSettings(path); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("no settings section: %v, %v", got, err)
	}
	write("listen: 127.0.0.1:9999\nsetings:\n  gap_timeout: 3m\n")
	if _, err := ReadSettings(path); err == nil || !strings.Contains(err.Error(), "setings") {
		t.Fatalf("a misspelt section must be an error, got %v", err)
	}
	if c, _ := Load(nil, envOf(nil), io.Discard); c.File != "" || c.Settings != nil {
		t.Fatalf("without a file: %+v", c)
	}
}

// TestSettingsSectionCheckedAtLoad: an unknown key or a bad value in the
// file's settings section is a configuration error at Load (exit 2), like
// any other bad value in the file, instead of surfacing only after the
// gateway opened, migrated and claimed its store. Pairs whose bounds
// depend on each other (backoff_base ≤ backoff_cap) are left to the
// gateway, which checks them against the stored values.
func TestSettingsSectionCheckedAtLoad(t *testing.T) {
	for name, tc := range map[string]struct{ section, want string }{
		"unknown key":    {"  gap_timout: 2m\n", "gap_timout"},
		"bad duration":   {"  quiet_period: soon\n", "quiet_period"},
		"out of bounds":  {"  max_attempts: 0\n", "max_attempts"},
		"not a switch":   {"  bloom: 1\n", "bloom"},
		"fine":           {"  gap_timeout: 2m\n  bloom: false\n", ""},
		"pair left over": {"  backoff_base: 2m\n", ""},
	} {
		path := filepath.Join(t.TempDir(), "wamux.yaml")
		if err := os.WriteFile(path, []byte("settings:\n"+tc.section), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "settings") {
			t.Errorf("%s: error %v, want one naming settings and %s", name, err, tc.want)
		}
	}
}
