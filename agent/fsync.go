package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// fsyncFile makes f's data durable: (*os.File).Sync. Tests wrap it to see
// which files and directories the spool syncs.
var fsyncFile = (*os.File).Sync

// syncFile makes the file at path durable, whoever wrote it.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = fsyncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes created, renamed and removed names in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("agent: sync spool dir: %w", err)
	}
	err = fsyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: sync spool dir: %w", err)
	}
	return nil
}

// mkdirDurable creates dir and its missing parents and makes each new
// name durable by syncing the directory that holds it. Syncing a file or a
// directory makes its contents durable, not the entry naming it, so
// without this a power loss after a Report returned could take the whole
// spool directory with it. A dir that already exists is left as it is:
// whoever created it answered for its entry.
func mkdirDurable(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent: create spool dir: %w", err)
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
