package load

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// minserverBinary builds ../minserver.
func minserverBinary(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "minserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "minserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building minserver: %v\n%s", err, out)
	}
	return bin
}

const testGrace = 200 * time.Millisecond

// runFailover runs a small failover scenario against base and checks what
// must hold on any correct server.
func runFailover(t *testing.T, base string, pid int) *FailoverReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Failover(ctx, NewClient(), FailoverConfig{
		Server: base, Rooms: 20, Players: 4, Concurrency: 8, Grace: testGrace, PIDs: []int{pid}, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.WriteText(&sb)
	t.Log("\n" + sb.String())
	if rep.Players != 80 || rep.ErrorCount != 0 || rep.RoomsLeftOut != 0 {
		t.Errorf("%d players joined, %d errors %v, %d rooms left out; want 80, 0, 0", rep.Players, rep.ErrorCount, rep.Errors, rep.RoomsLeftOut)
	}
	for name, s := range map[string]FailoverSummary{"handshake": rep.Handshake, "TCP drop": rep.TCPDrop} {
		if s.Rooms != 10 || s.FailedOver != 10 || s.NoFailover != 0 || s.Delay.Count != 10 {
			t.Errorf("%s rooms: %+v, want all 10 failed over", name, s)
		}
		// Both servers show the host reconnecting before handing its role on.
		if s.Noticed.Count != 10 || s.Expiry.Count != 10 || s.Noticed.P50Ms < 0 {
			t.Errorf("%s rooms: close to host offline %+v, then to new host %+v; want 10 samples each, the first not negative", name, s.Noticed, s.Expiry)
		}
	}
	if rep.WrongSuccessors != 0 || rep.SplitBrain != 0 || rep.OutOfOrder != 0 || rep.Duplicates != 0 {
		t.Errorf("wrong successors %d, split-brain %d, out of order %d, duplicates %d; want none (%v)",
			rep.WrongSuccessors, rep.SplitBrain, rep.OutOfOrder, rep.Duplicates, rep.Samples)
	}
	if rep.PlayersPerSecond <= 0 || rep.Join.Count != 80 || rep.Upgrade.Count != 80 || len(rep.Series.JoinMs) != 80 {
		t.Errorf("players/s %v, join samples %d, upgrade samples %d, series %d; want positive, 80 each",
			rep.PlayersPerSecond, rep.Join.Count, rep.Upgrade.Count, len(rep.Series.JoinMs))
	}
	if rep.JoinPhase.WallSeconds <= 0 || rep.JoinPhase.ToolCPUSeconds <= 0 || rep.FailoverPhase.WallSeconds <= 0 || rep.CloseSeconds <= 0 {
		t.Errorf("phases: joins %+v, failover %+v, closes %vs; want wall and CPU times", rep.JoinPhase, rep.FailoverPhase, rep.CloseSeconds)
	}
	joins := 0
	for _, n := range rep.Series.JoinsPer100ms {
		joins += n
	}
	if joins != 80 {
		t.Errorf("joins over time add up to %d, want 80", joins)
	}
	res := rep.Resources
	if res == nil || len(res.Errors) > 0 || res.CPUSeconds <= 0 || res.CPUPerPlayerUs <= 0 ||
		res.PeakRSSMB <= 0 || res.PeakRSSPerSocketKB <= 0 || res.Sockets != 80 || len(res.RSS) == 0 {
		t.Errorf("server resources %+v, want CPU, peak RSS per socket and RSS samples", res)
	}
	return rep
}

func TestFailoverWSServerMemory(t *testing.T) {
	base, pid := startProcess(t, serverBinary(t), "-log-level", "warn", "-store", "memory", "-grace", testGrace.String())
	runFailover(t, base, pid)
}

func TestFailoverMinserver(t *testing.T) {
	base, pid := startProcess(t, minserverBinary(t), "-grace", testGrace.String())
	runFailover(t, base, pid)
}

// storeArgs returns the wsserver flags for a store taken from the
// environment, with a fresh schema or prefix (tag), skipping the test
// without the variable unless CI=true. cleanup, run at the end, removes
// what the server stored under tag (best effort: a missing client tool is
// only logged).
func storeArgs(t *testing.T, env string, args func(v, tag string) []string, cleanup func(v, tag string) *exec.Cmd) []string {
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set (CI=true)", env)
		}
		t.Skipf("%s is not set", env)
	}
	tag := "lobbyload_fo_" + strings.ToLower(t.Name()) + "_" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		if out, err := cleanup(v, tag).CombinedOutput(); err != nil {
			t.Logf("removing %s: %v %s", tag, err, out)
		}
	})
	return args(v, tag)
}

// testTicketKeys signs the server's tickets: on a shared store it needs a
// key, which its processes share.
const testTicketKeys = "6c6f626279686f7374206c6f61642074657374207469636b6574206b6579732121"

func TestFailoverWSServerPostgres(t *testing.T) {
	args := storeArgs(t, "LOBBYHOST_POSTGRES_DSN", func(dsn, tag string) []string {
		return []string{"-store", "postgres", "-postgres-dsn", dsn, "-postgres-schema", tag, "-ticket-keys", testTicketKeys}
	}, func(dsn, tag string) *exec.Cmd {
		return exec.Command("psql", dsn, "-qc", `DROP SCHEMA IF EXISTS "`+tag+`" CASCADE`)
	})
	base, pid := startProcess(t, serverBinary(t), append([]string{"-log-level", "warn", "-grace", testGrace.String()}, args...)...)
	runFailover(t, base, pid)
}

func TestFailoverWSServerRedis(t *testing.T) {
	args := storeArgs(t, "LOBBYHOST_REDIS_ADDR", func(addr, tag string) []string {
		return []string{"-store", "redis", "-redis-addr", addr, "-redis-prefix", tag, "-ticket-keys", testTicketKeys}
	}, func(addr, tag string) *exec.Cmd {
		host, port, _ := strings.Cut(addr, ":")
		cli := "redis-cli -h " + host + " -p " + port
		return exec.Command("sh", "-c", cli+" --scan --pattern '{"+tag+"*' | xargs -r -n 500 "+cli+" del >/dev/null")
	})
	base, pid := startProcess(t, serverBinary(t), append([]string{"-log-level", "warn", "-grace", testGrace.String()}, args...)...)
	runFailover(t, base, pid)
}
