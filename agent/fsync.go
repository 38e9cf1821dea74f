package agent

import (
	"fmt"
	"os"
)

// fsyncFile makes f's data durable: (*os.File).Sync. Tests wrap it to see
// which files the spool syncs.
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
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: sync spool dir: %w", err)
	}
	return nil
}
