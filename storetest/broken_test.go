package storetest_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// brokenEnv names the flaw TestBrokenTarget gives its store.
const brokenEnv = "LOBBYHOST_STORETEST_FLAW"

// runSimple runs the suite on simple stores with flaw f: newStore's keep
// every entry, NewRetained's keep what they are told.
func runSimple(t *testing.T, f flaw) {
	storetest.RunWith(t, func(*testing.T) store.Store { return newSimpleStore(f, store.Retention{}) }, storetest.Options{
		NewRetained: func(_ *testing.T, r store.Retention) store.Store { return newSimpleStore(f, r) },
	})
}

// TestSimpleStore is the control for TestBrokenStores: without a flaw, the
// store the flaws are cut from passes the whole suite.
func TestSimpleStore(t *testing.T) {
	runSimple(t, noFlaw)
}

// TestBrokenTarget runs the suite on the flawed store named by the
// environment. It is the child half of TestBrokenStores and does nothing in
// an ordinary run.
func TestBrokenTarget(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("run by TestBrokenStores, which re-executes the test binary with " + brokenEnv + " set")
	}
	for _, f := range flaws {
		if f.name == name {
			runSimple(t, f)
			return
		}
	}
	t.Fatalf("%s=%q names no flaw", brokenEnv, name)
}

// noRetentionEnv makes TestNoRetentionTarget run.
const noRetentionEnv = "LOBBYHOST_STORETEST_NO_RETENTION"

// TestNoRetentionTarget runs the suite with Run, which gives it no way to
// choose a retention. It is the child half of TestRunWithoutRetention.
func TestNoRetentionTarget(t *testing.T) {
	if os.Getenv(noRetentionEnv) == "" {
		t.Skip("run by TestRunWithoutRetention, which re-executes the test binary with " + noRetentionEnv + " set")
	}
	storetest.Run(t, func(*testing.T) store.Store { return newSimpleStore(noFlaw, store.Retention{}) })
}

// TestRunWithoutRetention: Run without options fails the checks that need
// a chosen retention, saying what to provide, instead of skipping them,
// and still runs the others.
func TestRunWithoutRetention(t *testing.T) {
	if os.Getenv(noRetentionEnv) != "" {
		t.Skip("already the child process")
	}
	retention := []string{"RetentionCount", "TrimLog", "TrimLogClockBack", "TombstoneFold", "TombstoneAt", "TombstoneKeep",
		"TombstoneKeepEntries", "TombstoneKeepNoAge", "FloorHigh", "ConsumerCompacted", "ModelRetained"}
	pattern := "^TestNoRetentionTarget$/^(" + strings.Join(retention, "|") + "|LogRead)$"
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), noRetentionEnv+"=1")
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("the suite without a retention constructor: want a failing run, got %v. Output:\n%s", err, out)
	}
	for _, name := range retention {
		if !strings.Contains(string(out), "--- FAIL: TestNoRetentionTarget/"+name+" ") {
			t.Errorf("check %s did not fail without Options.NewRetained. Output:\n%s", name, out)
		}
	}
	if !strings.Contains(string(out), "--- PASS: TestNoRetentionTarget/LogRead ") {
		t.Errorf("check LogRead did not pass without Options.NewRetained. Output:\n%s", out)
	}
	if n := strings.Count(string(out), "storetest.Options{NewRetained:"); n < len(retention) {
		t.Errorf("%d of %d failing retention checks say to provide Options.NewRetained. Output:\n%s", n, len(retention), out)
	}
}

// TestBrokenStores: each flawed store fails the suite, in the check meant to
// catch its flaw. The suite runs in a child process (this test binary again,
// running TestBrokenTarget) because a failing subtest cannot be contained in
// this one; the child runs only the expected check, which must fail without
// panicking.
func TestBrokenStores(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("already the child process")
	}
	for _, f := range flaws {
		t.Run(f.name, func(t *testing.T) {
			pattern := "^TestBrokenTarget$/^" + regexp.QuoteMeta(f.check) + "$"
			cmd := exec.CommandContext(t.Context(), os.Args[0],
				"-test.run="+pattern, "-test.count=1", "-rapid.nofailfile", "-test.timeout="+childTimeout.String())
			cmd.Env = append(os.Environ(), brokenEnv+"="+f.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with flaw %s; check %s should have failed. Output:\n%s", f.name, f.check, out)
			}
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("running the child test binary: %v", err)
			}
			want := "--- FAIL: TestBrokenTarget/" + f.check + " "
			if !strings.Contains(string(out), want) {
				t.Fatalf("flaw %s: the output lacks %q. Output:\n%s", f.name, want, out)
			}
			if strings.Contains(string(out), "test timed out") {
				t.Fatalf("flaw %s: check %s hung until the child's -test.timeout instead of failing. Output:\n%s", f.name, f.check, out)
			}
			if strings.Contains(string(out), "panic:") {
				t.Fatalf("flaw %s: check %s panicked instead of failing. Output:\n%s", f.name, f.check, out)
			}
			if testing.Verbose() {
				t.Logf("flaw %s caught by %s:\n%s", f.name, f.check, out)
			}
		})
	}
}

// childTimeout bounds a child run of one check: longer than a check may
// take (storetest.CheckTimeout), so a check that runs out of its own time
// still reports what it waited for before the binary gives up.
const childTimeout = storetest.CheckTimeout + time.Minute

// concurrentChecks are the checks that write, more than writeFailEvery
// times, from goroutines of their own.
var concurrentChecks = []string{
	"LogAtomic", "ConsumerRegistration", "ConsumersConcurrent", "ConsumersLinearizable",
	"ManyLobbies", "ConcurrentWriters", "ConcurrentReaders", "Linearizable",
	"SubscribeFollow", "BatchConcurrent",
}

// TestFailingWritesFailTheSuite: a store whose Write fails now and then (a
// lost connection) fails every check that writes from goroutines of its
// own, each by itself and reporting the failed write, instead of leaving a
// check waiting for a goroutine that gave up (which would hang the binary
// until its -timeout and swallow what the other checks reported).
func TestFailingWritesFailTheSuite(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("already the child process")
	}
	pattern := "^TestBrokenTarget$/^(" + strings.Join(concurrentChecks, "|") + ")$"
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run="+pattern, "-test.count=1", "-rapid.nofailfile", "-test.timeout="+childTimeout.String())
	cmd.Env = append(os.Environ(), brokenEnv+"="+writeFailsNowAndThen.name)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("the concurrent checks on a store whose writes fail now and then: want a failing run, got %v. Output:\n%s", err, out)
	}
	if strings.Contains(string(out), "test timed out") || strings.Contains(string(out), "panic:") {
		t.Fatalf("the concurrent checks hung or panicked on a store whose writes fail now and then. Output:\n%s", out)
	}
	for _, name := range concurrentChecks {
		if !strings.Contains(string(out), "--- FAIL: TestBrokenTarget/"+name+" ") {
			t.Errorf("check %s did not fail on a store whose writes fail now and then. Output:\n%s", name, out)
		}
	}
	if !strings.Contains(string(out), errInjected.Error()) {
		t.Errorf("no check reported the failed write (%q). Output:\n%s", errInjected, out)
	}
}

// TestClauseTable keeps docs/store-adapters.md honest: every broken store
// its clause table names exists and is caught by a check of that row, and
// every broken store appears in the table.
func TestClauseTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/store-adapters.md")
	if err != nil {
		t.Fatalf("reading the adapter guide: %v", err)
	}
	row := regexp.MustCompile(`^\| (\d+) \| (.+) \| (.+) \| (.+) \|$`)
	byName := map[string]flaw{}
	for _, f := range flaws {
		byName[f.name] = f
	}
	listed := map[string]bool{}
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		checks := strings.Split(m[3], ", ")
		for _, name := range strings.Split(m[4], ", ") {
			f, ok := byName[name]
			if !ok {
				t.Errorf("clause %s names broken store %q, which storetest does not have", m[1], name)
				continue
			}
			listed[name] = true
			if !slices.Contains(checks, f.check) {
				t.Errorf("clause %s: broken store %s is caught by %s, not by the row's checks %v", m[1], name, f.check, checks)
			}
		}
	}
	if rows < 40 {
		t.Fatalf("found %d rows of the clause table in docs/store-adapters.md, want the whole table", rows)
	}
	for _, f := range flaws {
		if !listed[f.name] {
			t.Errorf("broken store %s (caught by %s) is missing from the clause table", f.name, f.check)
		}
	}
}

// noBatchEnv makes TestNoBatchTarget run.
const noBatchEnv = "LOBBYHOST_STORETEST_NO_BATCH"

// batchChecks are the suite's checks of store.BatchWriter.
var batchChecks = []string{
	"BatchOutcomes", "BatchSameLobby", "BatchEmpty", "BatchAliasing",
	"BatchContextCancelled", "BatchConcurrent", "BatchSubscribe", "BatchLarge",
	"BatchAtomic", "BatchReleasesClaim", "BatchRetention",
}

// plainStore offers only store.Store of the store it holds: none of the
// optional capabilities.
type plainStore struct{ store.Store }

// TestNoBatchTarget runs the suite on a store without store.BatchWriter.
// It is the child half of TestWithoutBatchWriter.
func TestNoBatchTarget(t *testing.T) {
	if os.Getenv(noBatchEnv) == "" {
		t.Skip("run by TestWithoutBatchWriter, which re-executes the test binary with " + noBatchEnv + " set")
	}
	storetest.RunWith(t, func(*testing.T) store.Store { return plainStore{newSimpleStore(noFlaw, store.Retention{})} }, storetest.Options{
		NewRetained: func(_ *testing.T, r store.Retention) store.Store { return plainStore{newSimpleStore(noFlaw, r)} },
	})
}

// TestWithoutBatchWriter: a store without the optional store.BatchWriter
// passes the suite; each Batch check skips and says why, rather than
// failing.
func TestWithoutBatchWriter(t *testing.T) {
	if os.Getenv(noBatchEnv) != "" {
		t.Skip("already the child process")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNoBatchTarget$/^Batch", "-test.count=1", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), noBatchEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Batch checks on a store without store.BatchWriter: want a passing run, got %v. Output:\n%s", err, out)
	}
	for _, name := range batchChecks {
		if !strings.Contains(string(out), "--- SKIP: TestNoBatchTarget/"+name+" ") {
			t.Errorf("check %s did not skip on a store without store.BatchWriter. Output:\n%s", name, out)
		}
	}
	if n := strings.Count(string(out), "--- SKIP: TestNoBatchTarget/Batch"); n != len(batchChecks) {
		t.Errorf("%d Batch checks skipped, want the %d of batchChecks (is a new one missing from the list?). Output:\n%s", n, len(batchChecks), out)
	}
	if n := strings.Count(string(out), "does not implement the optional store.BatchWriter"); n != len(batchChecks) {
		t.Errorf("%d of %d skipped Batch checks say the store lacks store.BatchWriter. Output:\n%s", n, len(batchChecks), out)
	}
}
