package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lobbyhost/lobbyhost/store"
)

// sessionModel is the reference for the SessionModel check: what a
// correct store shows about sessions and their index after a sequence of
// calls made by callers whose clock (now) never goes back.
type sessionModel struct {
	now      time.Time
	sessions map[string]*modelSession // every session opened
	opened   int
	held     map[string][]string // lobby with a record → its last write's Sessions
}

type modelSession struct {
	deadline time.Time
	ended    bool
	// forgotten is forgetNone while the store must know the session,
	// forgetMaybe once an ExpiredSessions call was allowed to forget it
	// (it was due and held nothing; it can hold nothing again, because
	// writes list only live sessions), forgetDone once the store showed
	// it had.
	forgotten int
}

const (
	forgetNone = iota
	forgetMaybe
	forgetDone
)

// ghost is a session ID never opened, which writes may still list.
const ghost = "never-opened"

var sessionModelLobbies = []string{"a", "b", "c", "d"}

// holds reports whether some lobby's last write listed id.
func (m *sessionModel) holds(id string) bool {
	for _, ss := range m.held {
		if slices.Contains(ss, id) {
			return true
		}
	}
	return false
}

func (m *sessionModel) lobbies(id string) []string {
	var out []string
	for l, ss := range m.held {
		if slices.Contains(ss, id) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// ids returns every session ID opened, in order, and the ghost.
func (m *sessionModel) ids() []string {
	out := []string{ghost}
	for i := range m.opened {
		out = append(out, fmt.Sprintf("m%d", i))
	}
	return out
}

// checkSessionModel (store.Sessions only): random sequences of session
// calls and writes naming sessions agree with a reference model after
// every step: deadlines, renewals and ends, the index, ExpiredSessions
// with its order and limit, and forgetting.
func checkSessionModel(t *testing.T, newStore func(*testing.T) store.Store) {
	ctx := checkContext(t)
	probe := newStore(t)
	if _, ok := probe.(store.Sessions); !ok {
		t.Skip("the store does not implement the optional store.Sessions; nothing to check")
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := newStore(t)
		ss := s.(store.Sessions)
		m := &sessionModel{now: t0, sessions: map[string]*modelSession{}, held: map[string][]string{}}
		genOffset := rapid.IntRange(-2, 6)
		pick := func(rt *rapid.T) string { return rapid.SampledFrom(m.ids()).Draw(rt, "session") }
		version := func(rt *rapid.T, id string) (uint64, bool) {
			r, err := s.Load(ctx, id)
			switch {
			case err == nil:
				return r.Version, true
			case errors.Is(err, store.ErrNotFound):
				return r.Version, false
			}
			rt.Fatalf("Load(%q) = %v", id, err)
			return 0, false
		}
		deadlines := func(rt *rapid.T) {
			ids := m.ids()
			got, err := ss.SessionDeadlines(ctx, ids)
			if err != nil || len(got) != len(ids) {
				rt.Fatalf("SessionDeadlines(%q) = %v, %v", ids, got, err)
			}
			for i, id := range ids {
				x := m.sessions[id]
				switch {
				case x == nil || x.forgotten == forgetDone:
					if !got[i].IsZero() {
						rt.Fatalf("SessionDeadlines: %q = %v, want the zero time (unknown or forgotten)", id, got[i])
					}
				case x.forgotten == forgetMaybe && got[i].IsZero():
					x.forgotten = forgetDone
				case !got[i].Equal(x.deadline):
					rt.Fatalf("SessionDeadlines: %q = %v, want %v", id, got[i], x.deadline)
				}
			}
		}
		index := func(rt *rapid.T) {
			for _, id := range m.ids() {
				want := m.lobbies(id)
				limit := rapid.IntRange(1, 3).Draw(rt, "page")
				var got []string
				for after := ""; ; {
					page, err := ss.SessionLobbies(ctx, id, after, limit)
					if err != nil {
						rt.Fatalf("SessionLobbies(%q, %q, %d) = %v", id, after, limit, err)
					}
					got = append(got, page...)
					if len(page) < limit || len(got) > len(want) {
						break
					}
					after = page[len(page)-1]
				}
				if d := diff(want, got); d != "" {
					rt.Fatalf("SessionLobbies(%q) differs from the model (-want +got):\n%s", id, d)
				}
			}
		}
		actions := map[string]func(*rapid.T){
			"Open": func(rt *rapid.T) {
				id := fmt.Sprintf("m%d", m.opened)
				d := m.now.Add(time.Duration(genOffset.Draw(rt, "deadline")) * time.Second)
				if err := ss.OpenSession(ctx, id, d); err != nil {
					rt.Fatalf("OpenSession(%q, %v) = %v", id, d, err)
				}
				m.opened++
				m.sessions[id] = &modelSession{deadline: d}
			},
			"Reopen": func(rt *rapid.T) {
				id := pick(rt)
				x := m.sessions[id]
				if x == nil || x.forgotten != forgetNone {
					rt.Skip("not a session the store must know")
				}
				if err := ss.OpenSession(ctx, id, m.now.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
					rt.Fatalf("OpenSession of the known %q = %v, want %v", id, err, store.ErrConflict)
				}
			},
			"Renew": func(rt *rapid.T) {
				id := pick(rt)
				d := m.now.Add(time.Duration(genOffset.Draw(rt, "deadline")) * time.Second)
				x := m.sessions[id]
				alive := x != nil && x.forgotten == forgetNone && !x.ended && m.now.Before(x.deadline)
				err := ss.RenewSession(ctx, id, m.now, d)
				switch {
				case alive && err != nil:
					rt.Fatalf("RenewSession(%q, now %v, %v) of a live session = %v", id, m.now, d, err)
				case !alive && !errors.Is(err, store.ErrSessionEnded):
					rt.Fatalf("RenewSession(%q, now %v, %v) of a session over = %v, want %v", id, m.now, d, err, store.ErrSessionEnded)
				case alive && d.After(x.deadline):
					x.deadline = d
				}
			},
			"End": func(rt *rapid.T) {
				id := pick(rt)
				x := m.sessions[id]
				if x != nil && x.forgotten != forgetNone {
					rt.Skip("the store may or may not know it")
				}
				at := m.now.Add(time.Duration(genOffset.Draw(rt, "at")) * time.Second)
				if err := ss.EndSession(ctx, id, at); err != nil {
					rt.Fatalf("EndSession(%q, %v) = %v", id, at, err)
				}
				if x != nil {
					x.ended = true
					if at.Before(x.deadline) {
						x.deadline = at
					}
				}
			},
			"Write": func(rt *rapid.T) {
				lobby := rapid.SampledFrom(sessionModelLobbies).Draw(rt, "lobby")
				var live []string
				for _, id := range m.ids() {
					if x := m.sessions[id]; id == ghost || x.forgotten == forgetNone && m.now.Before(x.deadline) {
						live = append(live, id)
					}
				}
				list := rapid.SliceOfNDistinct(rapid.SampledFrom(live), 0, 3, rapid.ID[string]).Draw(rt, "sessions")
				slices.Sort(list)
				v, _ := version(rt, lobby)
				w := store.Write{ID: lobby, Expected: v, Data: []byte("x"), At: m.now, Sessions: list}
				if rapid.Bool().Draw(rt, "stale") {
					w.Expected = v + 1
					if err := s.Write(ctx, w); !errors.Is(err, store.ErrConflict) {
						rt.Fatalf("Write(%q, stale) = %v, want %v", lobby, err, store.ErrConflict)
					}
					return
				}
				if err := s.Write(ctx, w); err != nil {
					rt.Fatalf("Write(%q, Sessions %q) = %v", lobby, list, err)
				}
				m.held[lobby] = list
			},
			"Delete": func(rt *rapid.T) {
				lobby := rapid.SampledFrom(sessionModelLobbies).Draw(rt, "lobby")
				v, ok := version(rt, lobby)
				if !ok {
					rt.Skip("no record")
				}
				if err := s.Delete(ctx, store.Deletion{ID: lobby, Expected: v, At: m.now}); err != nil {
					rt.Fatalf("Delete(%q) = %v", lobby, err)
				}
				delete(m.held, lobby)
			},
			"Tick": func(rt *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "seconds")) * time.Second)
			},
			"Expired": func(rt *rapid.T) {
				limit := rapid.IntRange(1, 4).Draw(rt, "limit")
				var want []store.SessionDeadline
				for id, x := range m.sessions {
					if x.forgotten == forgetNone && !x.deadline.After(m.now) && m.holds(id) {
						want = append(want, store.SessionDeadline{ID: id, Deadline: x.deadline})
					}
				}
				slices.SortFunc(want, func(a, b store.SessionDeadline) int {
					return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.ID, b.ID))
				})
				want = want[:min(len(want), limit)]
				got, err := ss.ExpiredSessions(ctx, m.now, limit)
				if err != nil {
					rt.Fatalf("ExpiredSessions(%v, %d) = %v", m.now, limit, err)
				}
				if d := diff(want, got); d != "" {
					rt.Fatalf("ExpiredSessions(%v, %d) differs from the model (-want +got):\n%s", m.now, limit, d)
				}
				for id, x := range m.sessions {
					if x.forgotten == forgetNone && !x.deadline.After(m.now) && !m.holds(id) {
						x.forgotten = forgetMaybe
					}
				}
			},
			"": func(rt *rapid.T) {
				deadlines(rt)
				index(rt)
			},
		}
		rt.Repeat(actions)
	})
}
