package storetest_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// brokenEnv names the flaw TestBrokenTarget gives its store.
const brokenEnv = "LOBBYHOST_STORETEST_FLAW"

// TestSimpleStore is the control for TestBrokenStores: without a flaw, the
// store the flaws are cut from passes the whole suite.
func TestSimpleStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return newSimpleStore(noFlaw) })
}

// TestMemstore runs the suite on the in-memory store from this package too,
// so a change to the suite is checked against it without leaving here.
func TestMemstore(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
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
			storetest.Run(t, func(*testing.T) store.Store { return newSimpleStore(f) })
			return
		}
	}
	t.Fatalf("%s=%q names no flaw", brokenEnv, name)
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
				"-test.run="+pattern, "-test.count=1", "-rapid.nofailfile")
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
			if strings.Contains(string(out), "panic:") {
				t.Fatalf("flaw %s: check %s panicked instead of failing. Output:\n%s", f.name, f.check, out)
			}
			if testing.Verbose() {
				t.Logf("flaw %s caught by %s:\n%s", f.name, f.check, out)
			}
		})
	}
}
