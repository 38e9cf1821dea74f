package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileWithSeveralDocumentsRefused: a file of several YAML documents
// ("---" between them, as a pasted block often has) is refused: the
// decoder reads only the first, so every key of the others, typos
// included, would be silently ignored, against "unknown YAML keys are an
// error". A lone leading "---" is one document and is fine.
func TestFileWithSeveralDocumentsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		file string
		ok   bool
	}{
		"two documents":          {"listen: 127.0.0.1:7000\n---\nlisen: 127.0.0.1:7001\n", false},
		"empty first document":   {"---\n---\nlisten: 127.0.0.1:7000\n", false},
		"settings in the second": {"listen: 127.0.0.1:7000\n---\nsettings:\n  gap_timeout: 2m\n", false},
		"leading marker":         {"---\nlisten: 127.0.0.1:7000\n", true},
		"trailing end marker":    {"listen: 127.0.0.1:7000\n...\n", true},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
		_, rerr := ReadSettings(path)
		if tc.ok {
			if err != nil || rerr != nil {
				t.Errorf("%s: Load %v, ReadSettings %v", name, err, rerr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "one YAML document") {
			t.Errorf("%s: Load error %v, want the extra document named", name, err)
		}
		if rerr == nil {
			t.Errorf("%s: ReadSettings accepted it", name)
		}
	}
}

// TestFileErrorsNameTheSetting: a value of the wrong type or shape in the
// file is reported with its line and the key it belongs to, so that the
// operator finds it although the value itself is hidden; a duration that
// does not parse is one such error, not a bare "time: invalid duration"
// that names neither.
func TestFileErrorsNameTheSetting(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"bad duration":     {"listen: 127.0.0.1:7000\nshutdown_timeout: soon\n", "line 2: shutdown_timeout:"},
		"duration no unit": {"shutdown_timeout: 15\n", "line 1: shutdown_timeout:"},
		"duration as map":  {"shutdown_timeout:\n  s: 1\n", "line 2: shutdown_timeout"},
		"int as text":      {"log_level: info\nreceipt_bloom_per_hour: lots\n", "line 2: receipt_bloom_per_hour:"},
		"list item":        {"api_keys:\n  - k3y-0000001\n  - [nested]\n", "line 3: api_keys:"},
		"settings value":   {"settings:\n  gap_timeout: [2m]\n", "line 2: settings.gap_timeout:"},
	} {
		path := filepath.Join(t.TempDir(), "wamux.yaml")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
		if _, err := ReadSettings(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadSettings error %v, want it to contain %q", name, err, tc.want)
		}
	}
}
