// Package migration is the part of the store migration runners that does
// not depend on the database: it lists the embedded SQL files, checks the
// versions and checksums a database records against them, and decides
// which files to apply.
package migration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// TooNewError refuses a database that records a migration newer than
// every file this binary carries: a newer wamux migrated it.
type TooNewError struct {
	Applied int64 // the database's newest migration
	Known   int64 // this binary's newest migration
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("database schema is at migration %d, this binary knows up to %d; run a newer wamux", e.Applied, e.Known)
}

// ChangedError refuses a database where a migration was applied from
// another text than the file this binary carries.
type ChangedError struct {
	Name     string // the file's base name
	Recorded string // checksum recorded when it was applied
	Current  string // checksum of the file now
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("migration %s changed after it was applied (checksum %.12s applied, %.12s now); "+
		"restore the file and put the change in a new migration", e.Name, e.Recorded, e.Current)
}

// File is one numbered SQL file.
type File struct {
	Version  int64
	Name     string // base name, e.g. 0050_receipt_pipeline.sql
	Body     string
	Checksum string // hex SHA-256 of Body
}

// Load reads the files matching pattern in fsys, ordered by version. Each
// name starts with its version number, followed by an underscore.
func Load(fsys fs.FS, pattern string) ([]File, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	files := make([]File, 0, len(names))
	seen := map[int64]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		version, err := strconv.ParseInt(num, 10, 64)
		if err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number", base)
		}
		if other, ok := seen[version]; ok {
			return nil, fmt.Errorf("migrations %s and %s have the same number", other, base)
		}
		seen[version] = base
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		files = append(files, File{Version: version, Name: base, Body: string(body), Checksum: Checksum(body)})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Version < files[j].Version })
	return files, nil
}

// Checksum is the hex SHA-256 of a migration's body.
func Checksum(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Applied is what a database records of one applied migration; Checksum is
// "" where none is recorded yet (applied before checksums were kept).
type Applied struct {
	Version  int64
	Checksum string
}

// Pending checks the applied migrations against files and returns the
// files still to apply, in order. It refuses a database that records a
// version above the newest file (*TooNewError) and an applied file whose
// recorded checksum differs from its body (*ChangedError).
func Pending(files []File, applied []Applied) ([]File, error) {
	var known int64
	byVersion := make(map[int64]File, len(files))
	for _, f := range files {
		byVersion[f.Version] = f
		known = max(known, f.Version)
	}
	var newest int64
	done := make(map[int64]bool, len(applied))
	for _, a := range applied {
		newest = max(newest, a.Version)
		done[a.Version] = true
	}
	if newest > known {
		return nil, &TooNewError{Applied: newest, Known: known}
	}
	for _, a := range applied {
		f, ok := byVersion[a.Version]
		if !ok || a.Checksum == "" || a.Checksum == f.Checksum {
			continue
		}
		return nil, &ChangedError{Name: f.Name, Recorded: a.Checksum, Current: f.Checksum}
	}
	var pending []File
	for _, f := range files {
		if !done[f.Version] {
			pending = append(pending, f)
		}
	}
	return pending, nil
}
