package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFiles are the documents that show wamux command lines.
var docFiles = []string{"../../README.md", "../../docs/BENCHMARKS.md", "../../docs/api.md",
	"../../docs/configuration.md", "../../docs/durability.md", "../../docs/operations.md",
	"../../docs/simulator.md"}

// docCommand matches a wamux command line in a document: from the
// subcommand to the end of the code span or line, or to a redirection.
var docCommand = regexp.MustCompile("wamux ((?:serve|sim|demo|bench)(?:[^`\n|#&>]*))")

// shellSubst is a quoted command substitution, such as "$(mktemp -d)": a
// value the shell computes.
var shellSubst = regexp.MustCompile(`"\$\([^)]*\)"`)

// joinContinuations joins the lines a backslash continues.
func joinContinuations(text string) string {
	return strings.ReplaceAll(text, "\\\n", " ")
}

// documentedCommands returns the argument lists of every wamux command the
// documents show, with the placeholders of prose ("[--x]", "…", FILE)
// turned into something a parser takes.
func documentedCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range docFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docCommand.FindAllStringSubmatch(joinContinuations(string(raw)), -1) {
			line := strings.NewReplacer("[", " ", "]", " ", "…", " ").Replace(shellSubst.ReplaceAllString(m[1], "VALUE"))
			var args []string
			for _, w := range strings.Fields(line) {
				if w == "or" || w == "before" { // prose after a code span
					break
				}
				// Profiles go to the test's directory, not the package's.
				if k, _, ok := strings.Cut(w, "="); ok && slices.Contains([]string{"--cpuprofile", "--memprofile", "--trace"}, k) {
					w = k + "=" + filepath.Join(t.TempDir(), "profile")
				}
				args = append(args, w)
			}
			out[filepath.Base(f)+": wamux "+strings.Join(args, " ")] = args
		}
	}
	return out
}

// TestDocumentedCommandsParse: every wamux command line the README and
// the docs show still parses (the subcommand, kind and each flag exist
// and take the value shown). Each runs with --help added, so
// nothing is started; the context is cancelled in case something is.
func TestDocumentedCommandsParse(t *testing.T) {
	cmds := documentedCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("only %d command lines found", len(cmds))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for where, args := range cmds {
		if args[len(args)-1] == "bench" {
			args = append(args, "outbound") // "wamux bench --cpuprofile=FILE" stands for any kind
		}
		var out, errOut strings.Builder
		code := run(ctx, append(args, "--help"), &out, &errOut)
		if code != 0 || !strings.Contains(out.String()+errOut.String(), "usage: wamux") {
			t.Errorf("%s: exit %d\n%s%s", where, code, out.String(), errOut.String())
		}
	}
}

// TestDocumentedFlagsExist: every --flag the README and the docs name, in
// a command line or in prose, is a flag of some wamux command, as its
// --help shows.
func TestDocumentedFlagsExist(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var help strings.Builder
	for _, args := range [][]string{{"serve"}, {"sim"}, {"demo"}, {"bench"}, {"bench", "outbound"},
		{"bench", "receipts"}, {"bench", "webhook"}, {"bench", "events"}, {"bench", "flood"}, {"bench", "edge"}} {
		run(ctx, append(args, "--help"), &help, &help)
	}
	known := map[string]bool{"help": true}
	for _, m := range regexp.MustCompile(`(?m)(?:^\s+|\[)-{1,2}([a-z0-9-]+)`).FindAllStringSubmatch(help.String(), -1) {
		known[m[1]] = true
	}
	if len(known) < 50 {
		t.Fatalf("only %d flags read from --help", len(known))
	}
	flagRef := regexp.MustCompile("`[^`]*`")
	for _, f := range docFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Flags in code spans and in the lines of code blocks.
		text := string(raw)
		var code []string
		for i, part := range strings.Split(text, "```") {
			if i%2 == 0 {
				code = append(code, flagRef.FindAllString(part, -1)...)
			} else {
				code = append(code, strings.Split(joinContinuations(part), "\n")...)
			}
		}
		for _, c := range code {
			if !strings.Contains(c, "wamux") && !strings.HasPrefix(c, "`--") {
				continue // other tools' options (wrk, go test, curl)
			}
			for _, m := range regexp.MustCompile(`(?:^|[\s\x60\[])--([a-z0-9-]+)`).FindAllStringSubmatch(c, -1) {
				if !known[m[1]] {
					line := c
					for _, l := range strings.Split(c, "\n") {
						if strings.Contains(l, "--"+m[1]) {
							line = l
						}
					}
					t.Errorf("%s names --%s, which no wamux command has: %s", filepath.Base(f), m[1], line)
				}
			}
		}
	}
}

// TestBenchProfilesInAnyOrder: the profile flags before the kind may come
// in any order, as docs/simulator.md names them ("--cpuprofile=FILE,
// --memprofile=FILE or --trace=FILE (before the kind, in any order)"), and each writes its file.
func TestBenchProfilesInAnyOrder(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, trace := filepath.Join(dir, "cpu"), filepath.Join(dir, "mem"), filepath.Join(dir, "trace")
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"bench", "--trace=" + trace, "--cpuprofile=" + cpu, "--memprofile=" + mem, "--help"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	for _, f := range []string{cpu, mem, trace} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", filepath.Base(f), err, st)
		}
	}
}

// TestStrayArgumentsRefused: a word the flags do not take ("wamux demo
// 30s" for --duration 30s) is refused with exit 2, as serve and sim do,
// instead of being ignored while the command runs without it.
func TestStrayArgumentsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // should one run after all, it stops at once
	for _, args := range [][]string{{"demo", "30s"}, {"bench", "outbound", "--json", "extra"},
		{"bench", "receipts", "1000"}, {"bench", "webhook", "extra"},
		{"bench", "events", "extra"}, {"bench", "edge", "extra"}, {"serve", "extra"}, {"sim", "extra"}} {
		var errOut strings.Builder
		if code := run(ctx, args, io.Discard, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), "unexpected arguments") {
			t.Errorf("wamux %s: exit %d, %q; want 2 and the arguments named", strings.Join(args, " "), code, errOut.String())
		}
	}
}

// TestBenchReceiptsWithoutBaselineShowsNoRatio: with --baseline=false no
// baseline is timed, so the text report says so instead of printing
// "0 rows/s; ratio 0.00", which reads as a measured collapse.
func TestBenchReceiptsWithoutBaselineShowsNoRatio(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"bench", "receipts", "--receipts", "300", "--baseline=false"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if strings.Contains(out.String(), "ratio") || !strings.Contains(out.String(), "baseline  not timed") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestBenchEventsJSON: `wamux bench events --json` at a small size exits 0
// with a report in which every event written was delivered.
func TestBenchEventsJSON(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"bench", "events", "--messages", "30", "--rounds", "2", "--ceiling", "50",
		"--callers", "2", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	var rep struct {
		Written   int     `json:"events_written"`
		Delivered int     `json:"events_delivered"`
		Ratio     float64 `json:"ratio"`
		Ceiling   int     `json:"ceiling_events"`
		Rounds    []struct {
			Subscribed bool `json:"subscribed"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if rep.Written == 0 || rep.Delivered != rep.Written || rep.Ratio <= 0 || rep.Ceiling != 50 || len(rep.Rounds) != 2 {
		t.Fatalf("report %+v", rep)
	}
}
