package rules

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// cmpState compares states treating nil and empty slices and maps alike.
var cmpState = cmp.Options{cmpopts.EquateEmpty()}

// lobbyRun drives one lobby through the pure machine at chosen times,
// checking the structural invariants and the revision rule after every
// transition.
type lobbyRun struct {
	t      *testing.T
	m      *Machine
	s      *State
	now    time.Time
	events []Event
}

func newRun(t *testing.T, p Policy) *lobbyRun {
	t.Helper()
	m, err := NewMachine(p)
	if err != nil {
		t.Fatalf("NewMachine: %v", err)
	}
	return &lobbyRun{t: t, m: m, s: NewState("lobby-1", 0), now: t0}
}

// testPolicy is the default policy: grace 8 s, TTL 15 s.
func testPolicy() Policy { return DefaultPolicy() }

func (r *lobbyRun) at(d time.Duration) *lobbyRun {
	r.now = t0.Add(d)
	return r
}

func (r *lobbyRun) advance(d time.Duration) *lobbyRun {
	r.now = r.now.Add(d)
	return r
}

// do applies cmd at the current time and fails the test on error.
func (r *lobbyRun) do(cmd Command) Result {
	r.t.Helper()
	res, err := r.try(cmd)
	if err != nil {
		r.t.Fatalf("%v %q at %v: %v", cmd.Op, cmd.Player, r.now.Sub(t0), err)
	}
	return res
}

func (r *lobbyRun) try(cmd Command) (Result, error) {
	r.t.Helper()
	before := r.s.Clone()
	res, err := r.m.Apply(r.s, cmd, r.now)
	if err != nil {
		if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
			r.t.Fatalf("refused %v changed the state (-before +after):\n%s", cmd.Op, diff)
		}
		return res, err
	}
	if verr := r.s.Validate(); verr != nil {
		r.t.Fatalf("after %v: %v", cmd.Op, verr)
	}
	if !res.Changed {
		if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
			r.t.Fatalf("%v reported no change but changed the state (-before +after):\n%s", cmd.Op, diff)
		}
	}
	rev := before.Revision
	for _, e := range res.Events {
		rev++
		if e.Revision != rev {
			r.t.Fatalf("%v: event revision %d, want %d", cmd.Op, e.Revision, rev)
		}
	}
	if r.s.Revision != rev {
		r.t.Fatalf("%v: state revision %d after %d events from %d", cmd.Op, r.s.Revision, len(res.Events), before.Revision)
	}
	r.events = append(r.events, res.Events...)
	return res, nil
}

func (r *lobbyRun) join(player string) uint64 {
	r.t.Helper()
	return r.do(Join(player, nil)).Gen
}

func (r *lobbyRun) member(player string) *Member {
	return r.s.Member(player)
}

func (r *lobbyRun) wantHost(want string) {
	r.t.Helper()
	if r.s.Host != want {
		r.t.Fatalf("host = %q, want %q (revision %d)", r.s.Host, want, r.s.Revision)
	}
}

func (r *lobbyRun) wantRevision(want uint64) {
	r.t.Helper()
	if r.s.Revision != want {
		r.t.Fatalf("revision = %d, want %d", r.s.Revision, want)
	}
}

func (r *lobbyRun) wantStatus(player string, want Status) {
	r.t.Helper()
	m := r.s.Member(player)
	if m == nil {
		r.t.Fatalf("%s is not a member, want %v", player, want)
	}
	if got := m.Status(); got != want {
		r.t.Fatalf("%s is %v, want %v", player, got, want)
	}
}

// lastEvent returns the newest event.
func (r *lobbyRun) lastEvent() Event {
	r.t.Helper()
	if len(r.events) == 0 {
		r.t.Fatal("no events")
	}
	return r.events[len(r.events)-1]
}

// reasons lists the reasons of the events since index from.
func (r *lobbyRun) reasonsSince(from int) []string {
	var out []string
	for _, e := range r.events[from:] {
		out = append(out, string(e.Reason)+":"+e.Subject)
	}
	return out
}
