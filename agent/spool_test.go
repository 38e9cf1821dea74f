package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func encodeRecords(t *testing.T, recs []record) (data []byte, ends []int) {
	t.Helper()
	for _, r := range recs {
		var err error
		if data, err = appendRecord(data, r); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(data))
	}
	return data, ends
}

func spoolRecords(n int) []record {
	recs := make([]record, n)
	for i, r := range testReceipts("spool", n) {
		recs[i] = newRecord(r)
		recs[i].Seq = uint64(i + 1)
	}
	return recs
}

func openTestSpool(t *testing.T, dir string) (*spool, []record) {
	t.Helper()
	var visited []record
	s, err := openSpool(dir, testAccount, 1<<20, slog.New(slog.DiscardHandler), func(r record) { visited = append(visited, r) }, nil)
	if err != nil {
		t.Fatalf("openSpool: %v", err)
	}
	return s, visited
}

// A crash can cut the last segment anywhere; at every cut the spool opens,
// keeps exactly the whole records before it, and goes on appending after
// them.
func TestSpoolTornTailAtEveryCut(t *testing.T) {
	t.Parallel()
	recs := spoolRecords(4)
	data, ends := encodeRecords(t, recs)
	root := t.TempDir()
	for cut := 0; cut <= len(data); cut++ {
		dir := filepath.Join(root, fmt.Sprint(cut))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.seg"), data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		s, visited := openTestSpool(t, dir)
		if !slices.Equal(visited, recs[:whole]) {
			t.Fatalf("cut %d: recovered %v, want the first %d records", cut, visited, whole)
		}
		if cut%5 != 0 && !slices.Contains(ends, cut) {
			// Appending costs fsyncs; every fifth cut and the record
			// boundaries are enough to show it works after any of them.
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		next := newRecord(testReceipts("after", 1)[0])
		if err := s.append(context.Background(), next); err != nil {
			t.Fatalf("cut %d: append: %v", cut, err)
		}
		got, _, err := s.read(cursor{}, 100)
		if err != nil {
			t.Fatalf("cut %d: read: %v", cut, err)
		}
		if len(got) != whole+1 || !slices.Equal(got[:whole], recs[:whole]) ||
			got[whole].MessageID != next.MessageID || got[whole].Seq <= uint64(whole) {
			t.Fatalf("cut %d: read %v, want the %d whole records and the new one after them", cut, got, whole)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Damage that is not a clean cut — a zero-filled tail, a flipped bit — is
// skipped the same way.
func TestSpoolSkipsCorruptTail(t *testing.T) {
	t.Parallel()
	recs := spoolRecords(4)
	data, ends := encodeRecords(t, recs)
	for name, tc := range map[string]struct {
		data  []byte
		whole int
	}{
		"zero fill":        {append(slices.Clone(data), make([]byte, 300)...), 4},
		"flipped payload":  {flip(data, ends[1]+recordHeaderLen+3), 2},
		"flipped length":   {flip(data, ends[2]), 3},
		"oversized length": {append(slices.Clone(data), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), 4},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.seg"), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, visited := openTestSpool(t, dir)
			defer s.close()
			if !slices.Equal(visited, recs[:tc.whole]) {
				t.Fatalf("recovered %d records, want %d", len(visited), tc.whole)
			}
			got, _, err := s.read(cursor{}, 100)
			if err != nil || !slices.Equal(got, recs[:tc.whole]) {
				t.Fatalf("read %d records (%v), want %d", len(got), err, tc.whole)
			}
		})
	}
}

func flip(data []byte, i int) []byte {
	out := slices.Clone(data)
	out[i] ^= 0x10
	return out
}

// The ack mark survives a reopen and hides what it covers.
func TestSpoolAckSurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := openTestSpool(t, dir)
	for _, r := range testReceipts("ack", 10) {
		if err := s.append(context.Background(), newRecord(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ack(6); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.read(cursor{}, 100)
	if err != nil || len(got) != 4 || got[0].Seq != 7 {
		t.Fatalf("read after ack = %v, %v; want seqs 7…10", got, err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, visited := openTestSpool(t, dir)
	defer s.close()
	if len(visited) != 4 || visited[0].Seq != 7 {
		t.Fatalf("recovered %v, want seqs 7…10", visited)
	}
}

// A torn tail left by a crash does not stop the next agent: it delivers
// the whole records, then new ones.
func TestAgentToleratesTornTail(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwFail)
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, nil)
	rs := testReceipts("torn", 10)
	reportAll(t, a, rs)
	closeCanceled(t, a)

	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments = %v, %v; want one", segs, err)
	}
	half, _ := encodeRecords(t, []record{{Seq: 99, MessageID: "wamid.torn.half", Type: "read", EventTime: 1}})
	f, err := os.OpenFile(segs[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(half[:len(half)/2]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	g.setMode(gwOK)
	b := newTestAgent(t, g, dir, nil)
	if st := b.Stats(); st.Replayed != 10 {
		t.Errorf("Replayed = %d, want 10", st.Replayed)
	}
	more := testReceipts("after-torn", 4)
	reportAll(t, b, more)
	closeAgent(t, b)
	g.wantStored(t, append(rs, more...))
}

// After a kill -9 the spool holds what the dead agent wrote, fsynced or
// not: the page cache serves it all. Recovery replays those records and
// the repeat filter counts them as reported, so a Report of one of them
// returns nil at once; unless the spool makes them durable before New
// returns, a power loss after that Report loses the receipt.
func TestRecoverySyncsTheRecordsItReplays(t *testing.T) {
	// Not parallel: it wraps the package's fsync.
	var mu sync.Mutex
	synced := map[string]int{}
	orig := fsyncFile
	fsyncFile = func(f *os.File) error {
		mu.Lock()
		synced[filepath.Base(f.Name())]++
		mu.Unlock()
		return orig(f)
	}
	t.Cleanup(func() { fsyncFile = orig })

	dir := t.TempDir()
	recs := spoolRecords(6)
	acked, _ := encodeRecords(t, recs[:3])
	unacked, _ := encodeRecords(t, recs[3:])
	// Written without fsync, as the page cache shows a dead agent's writes.
	for name, data := range map[string][]byte{
		"00000000000000000001.seg": acked,
		"00000000000000000004.seg": unacked,
		ackFile:                    []byte("3\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, visited := openTestSpool(t, dir)
	defer s.close()
	if !slices.Equal(visited, recs[3:]) {
		t.Fatalf("recovered %v, want seqs 4…6", seqs(visited))
	}
	mu.Lock()
	defer mu.Unlock()
	if synced["00000000000000000004.seg"] == 0 {
		t.Errorf("the segment whose records were replayed was not fsynced by recovery (synced: %v)", synced)
	}
}

// fsyncing a file or a directory makes its contents durable, not the
// entry that names it in its parent. When New creates SpoolDir (and
// missing parents), each new entry is made durable before New returns;
// otherwise a power loss after a Report has returned can take the whole
// spool directory with it (XFS, btrfs, ext4 without a journal commit in
// between).
func TestNewSyncsTheParentsOfTheDirsItCreates(t *testing.T) {
	// Not parallel: it wraps the package's fsync.
	var mu sync.Mutex
	var synced []string
	orig := fsyncFile
	fsyncFile = func(f *os.File) error {
		mu.Lock()
		synced = append(synced, filepath.Clean(f.Name()))
		mu.Unlock()
		return orig(f)
	}
	t.Cleanup(func() { fsyncFile = orig })

	root := t.TempDir()
	dir := filepath.Join(root, "agents", "spool")
	s, _ := openTestSpool(t, dir)
	defer s.close()
	mu.Lock()
	defer mu.Unlock()
	for _, parent := range []string{root, filepath.Join(root, "agents")} {
		if !slices.Contains(synced, parent) {
			t.Errorf("%s, where openSpool created an entry, was not fsynced (synced: %v)", parent, synced)
		}
	}
}

// A segment write or fsync that fails (ENOSPC, EIO) fails the Reports of
// its group, and a Report after it goes to a fresh segment. Failed
// attempts leave no segment files behind: a caller retrying on a full
// disk must not fill the directory with them.
func TestFailedSegmentWriteIsReportedAndLeavesNoFile(t *testing.T) {
	// Not parallel: it wraps the package's fsync.
	var mu sync.Mutex
	failing := true
	orig := fsyncFile
	fsyncFile = func(f *os.File) error {
		mu.Lock()
		fail := failing && strings.HasSuffix(f.Name(), segmentSuffix)
		mu.Unlock()
		if fail {
			return syscall.ENOSPC
		}
		return orig(f)
	}
	t.Cleanup(func() { fsyncFile = orig })

	dir := t.TempDir()
	s, _ := openTestSpool(t, dir)
	rs := testReceipts("enospc", 6)
	for _, r := range rs[:5] {
		if err := s.append(context.Background(), newRecord(r)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk = %v, want ENOSPC", err)
		}
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix)); len(segs) != 0 {
		t.Errorf("failed appends left %d segment files: %v", len(segs), segs)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if err := s.append(context.Background(), newRecord(rs[5])); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.read(cursor{}, 100)
	if err != nil || len(got) != 1 || got[0].MessageID != rs[5].MessageID {
		t.Fatalf("read = %v, %v; want only the record appended after the disk freed up", got, err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, visited := openTestSpool(t, dir)
	defer s.close()
	if len(visited) != 1 || visited[0].MessageID != rs[5].MessageID {
		t.Errorf("recovered %v, want only the durable record", visited)
	}
}
