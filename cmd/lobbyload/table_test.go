package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// table.sh, small: it builds the servers and the tool, runs the failover
// scenario on the baseline and on wsserver over memory, and prints one
// table row per kind with every figure, leaving a JSON report per run and
// an HTML report per kind.
func TestTableScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries and runs two servers; skipped with -short")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("table.sh needs bash")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "table.sh")
	cmd.Env = append(os.Environ(), "OUT="+out, "KINDS=minimal memory", "RUNS=1", "ROOMS=12", "PLAYERS=3",
		"CONCURRENCY=8", "GRACE=150ms")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("table.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "| server | players/s | server CPU per player | peak RSS |") {
		t.Fatalf("table.sh printed no table:\n%s", stdout)
	}
	// A row: the kind, then figures with their units; no figure missing.
	row := regexp.MustCompile(`^\| (minimal|memory) \| [0-9.]+ \| [0-9.]+ µs \| [0-9.]+ MB \| [0-9.]+ KB \| [0-9.]+ / [0-9.]+ ms \| [0-9.]+ ms \|$`)
	seen := map[string]bool{}
	for _, l := range lines[2:] {
		if m := row.FindStringSubmatch(l); m != nil {
			seen[m[1]] = true
		}
	}
	if !seen["minimal"] || !seen["memory"] {
		t.Errorf("rows for minimal and memory with every figure, got:\n%s", stdout)
	}
	if !strings.Contains(string(stdout), "wrong successors 0, split-brain 0, out of order 0") {
		t.Errorf("the summary does not report a clean failover:\n%s", stdout)
	}
	for _, f := range []string{"minimal-1.json", "memory-1.json", "minimal.html", "memory.html"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
