package migration_test

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/wamux/wamux/store/internal/migration"
)

func testFiles(t *testing.T) []migration.File {
	t.Helper()
	files, err := migration.Load(fstest.MapFS{
		"m/0010_b.sql": {Data: []byte("B")},
		"m/0002_a.sql": {Data: []byte("A")},
		"m/0030_c.sql": {Data: []byte("C")},
	}, "m/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestLoadOrdersByVersion(t *testing.T) {
	files := testFiles(t)
	if len(files) != 3 || files[0].Name != "0002_a.sql" || files[1].Version != 10 || files[2].Body != "C" ||
		files[0].Checksum != migration.Checksum([]byte("A")) {
		t.Fatalf("files = %+v", files)
	}
}

func TestLoadRefusesBadNames(t *testing.T) {
	for _, fsys := range []fstest.MapFS{
		{"m/init.sql": {}},
		{"m/0_init.sql": {}},
		{"m/01_a.sql": {}, "m/1_b.sql": {}},
	} {
		if files, err := migration.Load(fsys, "m/*.sql"); err == nil {
			t.Errorf("Load(%v) = %+v, want an error", fsys, files)
		}
	}
}

func TestPending(t *testing.T) {
	files := testFiles(t)
	sum := func(v int64) string { return migration.Checksum([]byte(map[int64]string{2: "A", 10: "B", 30: "C"}[v])) }
	for _, tc := range []struct {
		name    string
		applied []migration.Applied
		want    []int64
	}{
		{"fresh", nil, []int64{2, 10, 30}},
		{"partly", []migration.Applied{{2, sum(2)}, {10, sum(10)}}, []int64{30}},
		{"without checksums", []migration.Applied{{2, ""}, {10, ""}}, []int64{30}},
		{"all", []migration.Applied{{2, sum(2)}, {10, sum(10)}, {30, sum(30)}}, nil},
		{"gap", []migration.Applied{{2, sum(2)}, {30, sum(30)}}, []int64{10}},
	} {
		got, err := migration.Pending(files, tc.applied)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var versions []int64
		for _, f := range got {
			versions = append(versions, f.Version)
		}
		if len(versions) != len(tc.want) || (len(versions) > 0 && versions[0] != tc.want[0]) {
			t.Errorf("%s: pending %v, want %v", tc.name, versions, tc.want)
		}
	}
}

func TestPendingRefusesNewerSchema(t *testing.T) {
	_, err := migration.Pending(testFiles(t), []migration.Applied{{2, ""}, {31, ""}})
	var tooNew *migration.TooNewError
	if !errors.As(err, &tooNew) || tooNew.Applied != 31 || tooNew.Known != 30 ||
		err.Error() != "database schema is at migration 31, this binary knows up to 30; run a newer wamux" {
		t.Fatalf("Pending = %v", err)
	}
}

func TestPendingRefusesChangedFile(t *testing.T) {
	_, err := migration.Pending(testFiles(t), []migration.Applied{{2, migration.Checksum([]byte("A"))},
		{10, migration.Checksum([]byte("B, as first written"))}})
	var changed *migration.ChangedError
	if !errors.As(err, &changed) || changed.Name != "0010_b.sql" {
		t.Fatalf("Pending = %v", err)
	}
}
