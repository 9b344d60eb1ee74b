package load

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverBinary builds examples/wsserver (from this repository, resolved by
// the workspace) unless LOBBYLOAD_WSSERVER_BIN names a binary to use.
func serverBinary(t *testing.T) string {
	if bin := os.Getenv("LOBBYLOAD_WSSERVER_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "wsserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "..", "examples", "wsserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the server: %v\n%s", err, out)
	}
	return bin
}

// startServer runs the wsserver binary and returns its base URL.
func startServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	base, _ := startProcess(t, bin, append([]string{"-log-level", "warn"}, args...)...)
	return base
}

// startProcess runs a server binary that prints its URL on its first line,
// stops it at the end of the test, and returns the URL and its PID.
func startProcess(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	i := strings.Index(line, "http://")
	if err != nil || i < 0 {
		t.Fatalf("server printed no URL: %q %v", line, err)
	}
	return strings.TrimSuffix(strings.Fields(line[i:])[0], "/"), cmd.Process.Pid
}

// A small fanout run against one server process on the memory store: every
// change sent reaches every watcher, in order, once.
func TestFanoutMemory(t *testing.T) {
	base := startServer(t, serverBinary(t), "-store", "memory", "-heartbeat-ttl", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Fanout(ctx, NewClient(), FanoutConfig{
		Servers: []string{base}, RoomsPerServer: 30, Rate: 150, Duration: 2 * time.Second,
		Drain: 10 * time.Second, Seed: 1, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.WriteText(&sb)
	t.Log("\n" + sb.String())
	d := rep.Deliveries
	if rep.ChangesSent < 100 {
		t.Errorf("%d changes sent in 2s at 150/s, want at least 100", rep.ChangesSent)
	}
	if rep.ChangesFailed != 0 || rep.ChangesRecorded != rep.ChangesSent {
		t.Errorf("changes: %d sent, %d failed, %d recorded; errors %v", rep.ChangesSent, rep.ChangesFailed, rep.ChangesRecorded, rep.Errors)
	}
	if d.Expected != rep.ChangesSent || d.Received != d.Expected {
		t.Errorf("deliveries: expected %d (one watcher per room: want %d), received %d", d.Expected, rep.ChangesSent, d.Received)
	}
	if rep.WatchersLost != 0 {
		t.Errorf("%d watchers closed by the server: %v", rep.WatchersLost, rep.WatchersLostBy)
	}
	if d.Gaps != 0 || d.Duplicates != 0 || d.OutOfOrder != 0 || d.Unexpected != 0 || d.SnapshotJumps != 0 {
		t.Errorf("deliveries: %+v, want no gaps, duplicates, reordering, snapshots or unexpected revisions", d)
	}
	if n := rep.Latency.SameProcess.Count; n != d.Received {
		t.Errorf("%d latency samples, want one per delivery (%d)", n, d.Received)
	}
	if rep.Latency.CrossProcess.Count != 0 {
		t.Errorf("cross-process samples with one process: %d", rep.Latency.CrossProcess.Count)
	}
	if len(rep.Processes) != 1 || rep.Processes[0].ChangesInServedRooms != rep.ChangesSent {
		t.Errorf("process report %+v, want one process serving all %d changes", rep.Processes, rep.ChangesSent)
	}
}

// The metric parser reads the counter by method and sums the reads.
func TestReadsFromMetrics(t *testing.T) {
	if got := labelValue(`method="ReadLog",store="pg"`, "method"); got != "ReadLog" {
		t.Errorf("labelValue: %q", got)
	}
	if got := Reads(map[string]float64{"Load": 2, "ReadLog": 3, "LogHeads": 1, "Write": 9}); got != 6 {
		t.Errorf("Reads: %v, want 6", got)
	}
}
