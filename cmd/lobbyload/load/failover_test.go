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

// runFailover runs a small failover scenario (20 rooms, the default drop
// styles) against base and checks what must hold on any correct server.
func runFailover(t *testing.T, base string, pid int) *FailoverReport {
	t.Helper()
	return runScenario(t, base, pid, false, map[string]int{"handshake": 10, "TCP reset": 10})
}

// runBurst runs a small burst (21 rooms, every host dropped at once, 7 of
// each drop style) against base and checks what must hold on any correct
// server.
func runBurst(t *testing.T, base string, pid int) *FailoverReport {
	t.Helper()
	rep := runScenario(t, base, pid, true, map[string]int{"handshake": 7, "TCP close": 7, "TCP reset": 7}, 21)
	if rep.Scenario != "burst" || rep.CloseConcurrency != 21 || len(rep.Drops) != 3 {
		t.Errorf("scenario %q, %d closes in flight, drops %v; want burst, 21, all three", rep.Scenario, rep.CloseConcurrency, rep.Drops)
	}
	return rep
}

// runScenario runs 20 rooms (or rooms[0]) × 4 players with grace testGrace,
// a burst or not, and checks the outcome; perDrop is the number of rooms
// each drop style must have had.
func runScenario(t *testing.T, base string, pid int, burst bool, perDrop map[string]int, rooms ...int) *FailoverReport {
	t.Helper()
	n := 20
	if len(rooms) > 0 {
		n = rooms[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Failover(ctx, NewClient(), FailoverConfig{
		Server: base, Rooms: n, Players: 4, Concurrency: 8, Burst: burst, Grace: testGrace, PIDs: []int{pid}, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.WriteText(&sb)
	t.Log("\n" + sb.String())
	players := 4 * n
	if rep.Players != players || rep.ErrorCount != 0 || rep.RoomsLeftOut != 0 {
		t.Errorf("%d players joined, %d errors %v, %d rooms left out; want %d, 0, 0", rep.Players, rep.ErrorCount, rep.Errors, rep.RoomsLeftOut, players)
	}
	for name, s := range map[string]FailoverSummary{"handshake": rep.Handshake, "TCP close": rep.TCPClose, "TCP reset": rep.TCPDrop} {
		want := int64(perDrop[name])
		if int64(s.Rooms) != want || int64(s.FailedOver) != want || s.NoFailover != 0 || s.Delay.Count != want {
			t.Errorf("%s rooms: %+v, want all %d failed over", name, s, want)
		}
		if s.Noticed.Count != want || s.Expiry.Count != want {
			t.Errorf("%s rooms: close to host offline %+v, then to new host %+v; want %d samples each", name, s.Noticed, s.Expiry, want)
		}
	}
	checkSplit(t, rep)
	if rep.WrongSuccessors != 0 || rep.SplitBrain != 0 || rep.OutOfOrder != 0 || rep.Duplicates != 0 || rep.SocketsLost != 0 || rep.Unsettled != 0 {
		t.Errorf("wrong successors %d, split-brain %d, out of order %d, duplicates %d, sockets lost %d, unsettled %d; want none (%v)",
			rep.WrongSuccessors, rep.SplitBrain, rep.OutOfOrder, rep.Duplicates, rep.SocketsLost, rep.Unsettled, rep.Samples)
	}
	if rep.PlayersPerSecond <= 0 || rep.Join.Count != int64(players) || rep.Upgrade.Count != int64(players) || len(rep.Series.JoinMs) != players {
		t.Errorf("players/s %v, join samples %d, upgrade samples %d, series %d; want positive, %d each",
			rep.PlayersPerSecond, rep.Join.Count, rep.Upgrade.Count, len(rep.Series.JoinMs), players)
	}
	if rep.JoinPhase.WallSeconds <= 0 || rep.JoinPhase.ToolCPUSeconds <= 0 || rep.FailoverPhase.WallSeconds <= 0 || rep.CloseSeconds <= 0 {
		t.Errorf("phases: joins %+v, failover %+v, closes %vs; want wall and CPU times", rep.JoinPhase, rep.FailoverPhase, rep.CloseSeconds)
	}
	joins := 0
	for _, n := range rep.Series.JoinsPer100ms {
		joins += n
	}
	if joins != players {
		t.Errorf("joins over time add up to %d, want %d", joins, players)
	}
	res := rep.Resources
	if res == nil || len(res.Errors) > 0 || res.CPUSeconds <= 0 || res.CPUPerPlayerUs <= 0 ||
		res.PeakRSSMB <= 0 || res.PeakRSSPerSocketKB <= 0 || res.Sockets != players || len(res.RSS) == 0 {
		t.Errorf("server resources %+v, want CPU, peak RSS per socket and RSS samples", res)
	}
	return rep
}

// checkSplit checks the rooms' splits: present for every room that failed
// over, every figure non-negative (a correct server cannot hand the host on
// before the grace has run from its own notice of the close, which comes
// after the client's close), and the two parts together never more than
// the whole delay.
func checkSplit(t *testing.T, rep *FailoverReport) {
	t.Helper()
	failedOver := rep.Handshake.FailedOver + rep.TCPClose.FailedOver + rep.TCPDrop.FailedOver
	if len(rep.Series.Splits) != failedOver {
		t.Errorf("%d split samples, want one for each of the %d rooms that failed over", len(rep.Series.Splits), failedOver)
	}
	for _, s := range rep.Series.Splits {
		if s.DelayMs < 0 || s.NoticedMs < 0 || s.ExpiryMs < 0 || s.NoticedMs+s.ExpiryMs > s.DelayMs+0.001 {
			t.Errorf("room %s (%s): delay %.3f ms = noticed %.3f + expiry %.3f; want all non-negative, the parts adding up to at most the delay",
				s.Room, s.Drop, s.DelayMs, s.NoticedMs, s.ExpiryMs)
		}
	}
}

func TestBurstMinserver(t *testing.T) {
	base, pid := startProcess(t, minserverBinary(t), "-grace", testGrace.String())
	runBurst(t, base, pid)
}

func TestBurstWSServerMemory(t *testing.T) {
	base, pid := startProcess(t, serverBinary(t), "-log-level", "warn", "-store", "memory", "-grace", testGrace.String())
	runBurst(t, base, pid)
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
