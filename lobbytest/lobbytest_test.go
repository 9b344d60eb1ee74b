package lobbytest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobbytest"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// memHarness runs the suite on memstore behind a pretend server: calls fail
// while it is "down", and a volatile one comes back empty. It counts store
// calls as round trips. With a flaw set, its stores break one thing the
// Service relies on, and the suite must notice.
type memHarness struct{ flaw string }

var (
	_ store.Notifier              = (*memServer)(nil)
	_ store.Sessions              = (*memServer)(nil)
	_ lobbytest.Restarter         = memHarness{}
	_ lobbytest.VolatileRestarter = memHarness{}
	_ lobbytest.RoundTripCounter  = memHarness{}
	_ lobbytest.ErrorNamer        = memHarness{}
)

func (h memHarness) NewStore(testing.TB) store.Store {
	s := &memServer{flaw: h.flaw}
	s.inner.Store(memstore.New(memstore.WithRetention(lobbytest.MinRetention)))
	return s
}

func (memHarness) Connect(_ testing.TB, s store.Store) store.Store { return s }

func (h memHarness) Restartable(*testing.T) (store.Store, lobbytest.Server) {
	s := h.NewStore(nil).(*memServer)
	return s, s
}

func (h memHarness) RestartableVolatile(*testing.T) (store.Store, lobbytest.Server) {
	s := h.NewStore(nil).(*memServer)
	s.volatile = true
	return s, s
}

func (h memHarness) CountingStore(*testing.T) (store.Store, func() []string) {
	s := h.NewStore(nil).(*memServer)
	return s, s.take
}

func (memHarness) StoreName() string { return "memserver" }

// memServer is a store.Store on a memstore that a test can take down.
type memServer struct {
	flaw     string
	volatile bool
	inner    atomic.Pointer[memstore.Store]
	down     atomic.Bool

	mu    sync.Mutex
	calls []string
	feeds []*store.Feed // change feeds of Subscribe, live until their context ends
}

var errDown = errors.New("memserver: the server is down")

func (s *memServer) call(name string) (*memstore.Store, error) {
	s.mu.Lock()
	s.calls = append(s.calls, name)
	s.mu.Unlock()
	if s.down.Load() {
		return nil, fmt.Errorf("memserver: %s: %w", name, errDown)
	}
	return s.inner.Load(), nil
}

func (s *memServer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *memServer) Kill(*testing.T) { s.down.Store(true) }

func (s *memServer) Start(*testing.T) {
	if s.volatile {
		s.inner.Store(memstore.New(memstore.WithRetention(lobbytest.MinRetention)))
	}
	s.down.Store(false)
	// A subscriber of a real server would have lost its connection.
	s.mu.Lock()
	for _, f := range s.feeds {
		f.Lose()
	}
	s.mu.Unlock()
}

// Subscribe is the server's change notifications: every Write with a log
// entry is announced to every live feed after it commits (unless the flaw
// silent-feed swallows them).
func (s *memServer) Subscribe(ctx context.Context) (*store.Feed, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("memserver: Subscribe: %w", errDown)
	}
	f := store.NewFeed(0)
	s.mu.Lock()
	s.feeds = append(s.feeds, f)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.feeds = slices.DeleteFunc(s.feeds, func(x *store.Feed) bool { return x == f })
	})
	return f, nil
}

func (s *memServer) announce(w store.Write) {
	if w.Effects == nil || s.flaw == "silent-feed" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.feeds {
		f.Add(store.Change{Lobby: w.ID, Version: w.Expected + 1})
	}
}

func (s *memServer) Load(ctx context.Context, id string) (store.Record, error) {
	m, err := s.call("Load")
	if err != nil {
		return store.Record{}, err
	}
	return m.Load(ctx, id)
}

func (s *memServer) Write(ctx context.Context, w store.Write) error {
	m, err := s.call("Write")
	if err != nil {
		return err
	}
	switch s.flaw {
	case "blind-write":
		// A conflict is "resolved" by writing over the current version.
		if r, err := m.Load(ctx, w.ID); err == nil || errors.Is(err, store.ErrNotFound) {
			w.Expected = r.Version
		}
	case "drops-deadlines":
		w.Deadline = time.Time{}
	case "loads-first":
		if _, err := s.call("Load"); err != nil {
			return err
		}
	case "forgets-events":
		w.Effects = nil
	case "unindexed-sessions":
		w.Sessions = nil
	}
	if err := m.Write(ctx, w); err != nil {
		return err
	}
	s.announce(w)
	return nil
}

func (s *memServer) Delete(ctx context.Context, d store.Deletion) error {
	m, err := s.call("Delete")
	if err != nil {
		return err
	}
	return m.Delete(ctx, d)
}

func (s *memServer) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	m, err := s.call("Due")
	if err != nil {
		return nil, err
	}
	return m.Due(ctx, now, limit)
}

func (s *memServer) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	m, err := s.call("ReadLog")
	if err != nil {
		return nil, err
	}
	return m.ReadLog(ctx, id, after, limit)
}

func (s *memServer) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	m, err := s.call("LogHeads")
	if err != nil {
		return nil, err
	}
	return m.LogHeads(ctx, ids)
}

func (s *memServer) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	m, err := s.call("TrimLog")
	if err != nil {
		return 0, err
	}
	return m.TrimLog(ctx, now, limit)
}

func (s *memServer) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	m, err := s.call("ClaimLog")
	if err != nil {
		return nil, err
	}
	return m.ClaimLog(ctx, name, now, limit, hold)
}

func (s *memServer) RegisterConsumer(ctx context.Context, name string) error {
	m, err := s.call("RegisterConsumer")
	if err != nil {
		return err
	}
	return m.RegisterConsumer(ctx, name)
}

func (s *memServer) CommitLog(ctx context.Context, name, id string, after uint64) error {
	m, err := s.call("CommitLog")
	if err != nil {
		return err
	}
	return m.CommitLog(ctx, name, id, after)
}

// The session calls go to the server like the others. With the flaw
// unindexed-sessions, writes keep no index of the lobbies each session
// holds, so no process learns where an expired session's connections are.

func (s *memServer) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	m, err := s.call("OpenSession")
	if err != nil {
		return err
	}
	return m.OpenSession(ctx, id, deadline)
}

func (s *memServer) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	m, err := s.call("RenewSession")
	if err != nil {
		return err
	}
	return m.RenewSession(ctx, id, now, deadline)
}

func (s *memServer) EndSession(ctx context.Context, id string, at time.Time) error {
	m, err := s.call("EndSession")
	if err != nil {
		return err
	}
	return m.EndSession(ctx, id, at)
}

func (s *memServer) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	m, err := s.call("SessionDeadlines")
	if err != nil {
		return nil, err
	}
	return m.SessionDeadlines(ctx, ids)
}

func (s *memServer) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	m, err := s.call("ExpiredSessions")
	if err != nil {
		return nil, err
	}
	return m.ExpiredSessions(ctx, now, limit)
}

func (s *memServer) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	m, err := s.call("SessionLobbies")
	if err != nil {
		return nil, err
	}
	if s.flaw == "unindexed-sessions" {
		return nil, nil
	}
	return m.SessionLobbies(ctx, id, after, limit)
}

// TestRunService: the suite passes on a correct store, all capabilities
// included. It is the control for TestBrokenServices.
func TestRunService(t *testing.T) { lobbytest.RunService(t, memHarness{}) }

// quietHarness hands out memstores with their change notifications hidden
// (store.ComposeWith passes on only the capabilities named): a store
// without a Notifier is complete, and the suite must pass on it, watching
// and sessions included.
type quietHarness struct{}

func (quietHarness) NewStore(testing.TB) store.Store {
	m := memstore.New(memstore.WithRetention(lobbytest.MinRetention))
	return store.ComposeWith(m, store.Capabilities{Claimer: m, BatchWriter: m, Sessions: m})
}

func (quietHarness) Connect(_ testing.TB, s store.Store) store.Store { return s }

// TestRunServiceWithoutNotifier: the suite passes on a store without
// change notifications, where Run polls the log heads of watched lobbies.
func TestRunServiceWithoutNotifier(t *testing.T) {
	if _, ok := (quietHarness{}).NewStore(t).(store.Notifier); ok {
		t.Fatal("the quiet harness's store offers notifications")
	}
	lobbytest.RunService(t, quietHarness{})
}

// flaws are the broken stores the suite must fail, each with the subtest
// that must catch it.
var flaws = []struct{ name, check string }{
	{"blind-write", "TwoServicesExpireHostOnce/racing"},
	{"drops-deadlines", "KilledServiceLeases/survivor"},
	{"loads-first", "OneRoundTrip"},
	{"forgets-events", "StoreRestart/durable"},
	{"silent-feed", "WatchAcrossServices"},
	{"unindexed-sessions", "Sessions/KilledHolder"},
}

const flawEnv = "LOBBYHOST_LOBBYTEST_FLAW"

// TestBrokenTarget runs the suite on the broken store named by the
// environment; TestBrokenServices runs it in a child process.
func TestBrokenTarget(t *testing.T) {
	name := os.Getenv(flawEnv)
	if name == "" {
		t.Skip("run by TestBrokenServices, which re-executes the test binary with " + flawEnv + " set")
	}
	lobbytest.RunService(t, memHarness{flaw: name})
}

// TestBrokenServices: each broken store fails the suite in the subtest
// meant to catch it, without panicking.
func TestBrokenServices(t *testing.T) {
	if os.Getenv(flawEnv) != "" {
		t.Skip("already the child process")
	}
	for _, f := range flaws {
		t.Run(f.name, func(t *testing.T) {
			parts := strings.Split(f.check, "/")
			pattern := "^TestBrokenTarget$"
			for _, p := range parts {
				pattern += "/^" + regexp.QuoteMeta(p) + "$"
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+pattern, "-test.count=1")
			cmd.Env = append(os.Environ(), flawEnv+"="+f.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with flaw %s; %s should have failed. Output:\n%s", f.name, f.check, out)
			}
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("running the child test binary: %v", err)
			}
			if want := "--- FAIL: TestBrokenTarget/" + f.check + " "; !strings.Contains(string(out), want) {
				t.Fatalf("flaw %s: the output lacks %q. Output:\n%s", f.name, want, out)
			}
			if strings.Contains(string(out), "panic:") {
				t.Fatalf("flaw %s: %s panicked instead of failing. Output:\n%s", f.name, f.check, out)
			}
		})
	}
}
