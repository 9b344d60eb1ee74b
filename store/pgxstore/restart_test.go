package pgxstore

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lobbyhost/lobbyhost/store"
)

// ctlEnv names a command prefix that stops and starts the test server when
// given "stop" or "start" as its last argument. The restart test runs only
// when it is set, because it takes the server down for everyone using it.
const ctlEnv = "LOBBYHOST_POSTGRES_CTL"

func pgctl(t *testing.T, action string) error {
	t.Helper()
	if action == "start" && serverUp(t, 0) {
		return nil
	}
	out, err := exec.Command("sh", "-c", os.Getenv(ctlEnv)+" "+action).CombinedOutput()
	if err == nil {
		return nil
	}
	err = errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
	if action == "start" && serverUp(t, 10*time.Second) {
		// Someone else (a script that restarts a server it finds down)
		// started it first, which is as good.
		t.Logf("%s start failed, but the server is up: %v", ctlEnv, err)
		return nil
	}
	return err
}

// serverUp reports whether the test server accepts a connection, trying
// for up to within.
func serverUp(t *testing.T, within time.Duration) bool {
	dsn := testDSN(t)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return true
		}
		if time.Since(start) >= within {
			return false
		}
	}
}

// skipWithoutCtl skips a test that stops the server unless
// LOBBYHOST_POSTGRES_CTL says how.
func skipWithoutCtl(t *testing.T) {
	t.Helper()
	if os.Getenv(ctlEnv) == "" {
		t.Skipf("restart test skipped: it stops the PostgreSQL server; set %s to a command that takes stop|start, "+
			"e.g. %s='pg_ctlcluster --skip-systemctl-redirect 15 main'", ctlEnv, ctlEnv)
	}
}

// TestDatabaseRestart stops the server under a Store in use: calls fail
// promptly with wrapped errors naming the operation while it is down, and
// work again after it is back, the listener included.
func TestDatabaseRestart(t *testing.T) {
	skipWithoutCtl(t)
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.Write(ctx, store.Write{ID: "l", Data: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	listened := pids(s)
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextPID(t, listened, "Subscribe")

	// Traffic: a client heartbeating lobby "t" throughout, re-reading the
	// version after every failure (a write whose answer was lost may have
	// committed).
	tr := startTraffic(ctx, s)
	tr.waitFor(t, func(ok, _ int) bool { return ok >= 10 }, "writes before the stop")

	if err := pgctl(t, "stop"); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	// Whatever happens below, leave the server running.
	t.Cleanup(func() { _ = pgctl(t, "start") })

	for op, call := range map[string]func(context.Context) error{
		"load":  func(ctx context.Context) error { _, err := s.Load(ctx, "l"); return err },
		"write": func(ctx context.Context) error { return s.Write(ctx, store.Write{ID: "l", Expected: 1}) },
		"due":   func(ctx context.Context) error { _, err := s.Due(ctx, time.Now(), 1); return err },
	} {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := call(cctx)
		cancel()
		if err == nil {
			t.Fatalf("%s while the server is down = nil, want an error", op)
		}
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s while down = %v, which claims a store outcome", op, err)
		}
		if !strings.HasPrefix(err.Error(), "pgxstore: "+op) {
			t.Errorf("%s while down = %q, want it to start with %q", op, err, "pgxstore: "+op)
		}
		if el := time.Since(start); el > 6*time.Second {
			t.Errorf("%s while down took %v, want at most its 5s context", op, el)
		}
		t.Logf("%s while down: %v", op, err)
	}

	tr.waitFor(t, func(_, failed int) bool { return failed >= 1 }, "a failed write while down")
	okDown, _ := tr.counts()
	if err := pgctl(t, "start"); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	tr.waitFor(t, func(ok, _ int) bool { return ok >= okDown+10 }, "writes after the restart")
	ok, failed := tr.stop()
	rt, err := s.Load(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("traffic: %d writes succeeded, %d failed; lobby at version %d", ok, failed, rt.Version)
	// Every success is counted in the version; a failure may be too (its
	// commit can precede the lost answer).
	if rt.Version < uint64(ok) || rt.Version > uint64(ok+failed) {
		t.Errorf("traffic lobby at version %d after %d successful and %d failed writes, want within [%d, %d]",
			rt.Version, ok, failed, ok, ok+failed)
	}
	var r store.Record
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if r, err = s.Load(ctx, "l"); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("Load still failing 30s after the restart: %v", err)
		}
	}
	if r.Version != 1 || string(r.Data) != "before" {
		t.Fatalf("Load after restart = %+v, want version 1 with data \"before\"", r)
	}
	if err := s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("after")}); err != nil {
		t.Fatalf("Write after restart = %v", err)
	}
	nextPID(t, listened, "after the restart")
	for s.notify.lostAfterReconnect.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, lost := feed.Take(); !lost {
		t.Error("feed not marked lost after the listener reconnected")
	}
	if err := s.Write(ctx, store.Write{ID: "l", Expected: 2, Data: []byte("again"), Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	receiveChange(t, feed, store.Change{Lobby: "l", Version: 3}, "a Write with a log entry after the restart")
}

// traffic writes one lobby in a loop until stopped.
type traffic struct {
	mu     sync.Mutex
	cond   *sync.Cond
	ok     int
	failed int
	cancel context.CancelFunc
	done   chan struct{}
}

func startTraffic(ctx context.Context, s *Store) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	tr := &traffic{cancel: cancel, done: make(chan struct{})}
	tr.cond = sync.NewCond(&tr.mu)
	go func() {
		defer close(tr.done)
		var version uint64
		for ctx.Err() == nil {
			cctx, c := context.WithTimeout(ctx, 2*time.Second)
			err := s.Write(cctx, store.Write{ID: "t", Expected: version, Deadline: time.Now()})
			c()
			if err == nil {
				version++
			}
			tr.mu.Lock()
			if err == nil {
				tr.ok++
			} else if ctx.Err() == nil {
				tr.failed++
			}
			tr.cond.Broadcast()
			tr.mu.Unlock()
			if err == nil {
				continue
			}
			// Learn the version again; while the server is down this fails
			// and the next Write fails too.
			cctx, c = context.WithTimeout(ctx, 2*time.Second)
			r, lerr := s.Load(cctx, "t")
			c()
			if lerr == nil || errors.Is(lerr, store.ErrNotFound) {
				version = r.Version
			} else {
				time.Sleep(20 * time.Millisecond) // do not spin while down
			}
		}
	}()
	return tr
}

func (tr *traffic) counts() (ok, failed int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.ok, tr.failed
}

// waitFor blocks until cond holds for the counts, failing after 60s.
func (tr *traffic) waitFor(t *testing.T, cond func(ok, failed int) bool, what string) {
	t.Helper()
	timer := time.AfterFunc(60*time.Second, func() {
		tr.mu.Lock()
		tr.cond.Broadcast()
		tr.mu.Unlock()
	})
	defer timer.Stop()
	start := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for !cond(tr.ok, tr.failed) {
		if time.Since(start) >= 60*time.Second {
			t.Fatalf("traffic: no %s within 60s (%d ok, %d failed)", what, tr.ok, tr.failed)
		}
		tr.cond.Wait()
	}
}

// stop ends the traffic and returns its counts.
func (tr *traffic) stop() (ok, failed int) {
	tr.cancel()
	<-tr.done
	return tr.ok, tr.failed
}
