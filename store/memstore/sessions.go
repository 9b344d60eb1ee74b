package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// sessionTable is the store's store.Sessions state: one lock over the
// sessions, their deadline heap and their lobby sets. A Write takes it
// while holding its lobby's shard lock (the only order in which both are
// held), so the record and the index change in one step for every reader.
type sessionTable struct {
	mu   sync.Mutex
	byID map[string]*session
	heap []*session // min-heap by (deadline, ID) of the opened sessions
}

// session is one session ID the store knows: opened, or only named by
// the Sessions of some lobby's last Write (then not opened and not in the
// heap).
type session struct {
	id       string
	deadline time.Time // without monotonic reading; valid if opened
	opened   bool
	ended    bool // EndSession was called: no renewal succeeds any more
	lobbies  map[string]struct{}
	idx      int // index in sessionTable.heap, or -1
}

func sessionLess(a, b *session) bool {
	if !a.deadline.Equal(b.deadline) {
		return a.deadline.Before(b.deadline)
	}
	return a.id < b.id
}

func (t *sessionTable) get(id string) *session {
	if t.byID == nil {
		t.byID = map[string]*session{}
	}
	x := t.byID[id]
	if x == nil {
		x = &session{id: strings.Clone(id), idx: -1}
		t.byID[x.id] = x
	}
	return x
}

// drop forgets x if it is neither opened nor holding a lobby.
func (t *sessionTable) drop(x *session) {
	if !x.opened && len(x.lobbies) == 0 {
		delete(t.byID, x.id)
	}
}

// reindex moves lobby from the sessions of old to those of now (both
// sorted). The caller holds the lobby's shard lock.
func (s *Store) reindex(lobby string, old, now []string) {
	if len(old) == 0 && len(now) == 0 {
		return
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range old {
		if _, keep := slices.BinarySearch(now, id); keep {
			continue
		}
		if x := t.byID[id]; x != nil {
			delete(x.lobbies, lobby)
			t.drop(x)
		}
	}
	for _, id := range now {
		x := t.get(id)
		if x.lobbies == nil {
			x.lobbies = map[string]struct{}{}
		}
		x.lobbies[lobby] = struct{}{}
	}
}

// OpenSession records a new session alive until deadline: store.ErrConflict
// if the store knows id (opened, and not forgotten by ExpiredSessions),
// store.ErrInvalid for an empty ID or a zero deadline.
func (s *Store) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" || deadline.IsZero() {
		return fmt.Errorf("%w: OpenSession(%q, %v): empty ID or zero deadline", store.ErrInvalid, id, deadline)
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.get(id)
	if x.opened {
		return fmt.Errorf("%w: session %q exists", store.ErrConflict, id)
	}
	x.opened = true
	x.deadline = deadline.Round(0)
	t.push(x)
	return nil
}

// RenewSession moves the deadline of a session alive at now to
// max(current, deadline), else returns store.ErrSessionEnded.
func (s *Store) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" || deadline.IsZero() {
		return fmt.Errorf("%w: RenewSession(%q, %v): empty ID or zero deadline", store.ErrInvalid, id, deadline)
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.byID[id]
	if x == nil || !x.opened || x.ended || !now.Before(x.deadline) {
		return fmt.Errorf("%w: session %q", store.ErrSessionEnded, id)
	}
	if deadline.After(x.deadline) {
		x.deadline = deadline.Round(0)
		t.fix(x.idx)
	}
	return nil
}

// EndSession sets the deadline of a known session to min(current, at);
// no later renewal succeeds.
func (s *Store) EndSession(ctx context.Context, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" || at.IsZero() {
		return fmt.Errorf("%w: EndSession(%q, %v): empty ID or zero time", store.ErrInvalid, id, at)
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.byID[id]
	if x == nil || !x.opened {
		return nil
	}
	x.ended = true
	if at.Before(x.deadline) {
		x.deadline = at.Round(0)
		t.fix(x.idx)
	}
	return nil
}

// SessionDeadlines returns each session's deadline, the zero time for one
// the store does not know.
func (s *Store) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]time.Time, len(ids))
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		if x := t.byID[id]; x != nil && x.opened {
			out[i] = x.deadline
		}
	}
	return out, nil
}

// ExpiredSessions lists the sessions due at now that hold lobbies, by
// (deadline, ID), and forgets the due ones that hold none. It walks the
// deadline heap in order without popping it, so it visits only what it
// returns or forgets (and their heap children).
func (s *Store) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: ExpiredSessions limit %d", store.ErrInvalid, limit)
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	var (
		out    []store.SessionDeadline
		forget []*session
		front  []int // min-heap of indexes into t.heap: the walk's frontier
	)
	less := func(i, j int) bool { return sessionLess(t.heap[front[i]], t.heap[front[j]]) }
	push := func(i int) {
		if i >= len(t.heap) {
			return
		}
		front = append(front, i)
		for c := len(front) - 1; c > 0; {
			p := (c - 1) / 2
			if !less(c, p) {
				break
			}
			front[c], front[p] = front[p], front[c]
			c = p
		}
	}
	pop := func() int {
		top := front[0]
		last := len(front) - 1
		front[0] = front[last]
		front = front[:last]
		for p := 0; ; {
			c := 2*p + 1
			if c >= len(front) {
				break
			}
			if c+1 < len(front) && less(c+1, c) {
				c++
			}
			if !less(c, p) {
				break
			}
			front[c], front[p] = front[p], front[c]
			p = c
		}
		return top
	}
	push(0)
	for len(front) > 0 && len(out) < limit {
		i := pop()
		x := t.heap[i]
		if x.deadline.After(now) {
			break
		}
		if len(x.lobbies) > 0 {
			out = append(out, store.SessionDeadline{ID: x.id, Deadline: x.deadline})
		} else {
			forget = append(forget, x)
		}
		push(2*i + 1)
		push(2*i + 2)
	}
	for _, x := range forget {
		t.remove(x.idx)
		x.opened = false
		t.drop(x)
	}
	return out, nil
}

// SessionLobbies returns the lobbies the session holds after after, in
// byte order.
func (s *Store) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: SessionLobbies limit %d", store.ErrInvalid, limit)
	}
	t := &s.sess
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.byID[id]
	if x == nil {
		return nil, nil
	}
	var out []string
	for l := range x.lobbies {
		if l > after {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out, nil
}

// The deadline heap of the opened sessions.

func (t *sessionTable) push(x *session) {
	x.idx = len(t.heap)
	t.heap = append(t.heap, x)
	t.up(x.idx)
}

func (t *sessionTable) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.heap[i].idx, t.heap[j].idx = i, j
}

func (t *sessionTable) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !sessionLess(t.heap[i], t.heap[p]) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *sessionTable) down(i int) bool {
	start := i
	for {
		c := 2*i + 1
		if c >= len(t.heap) {
			break
		}
		if c+1 < len(t.heap) && sessionLess(t.heap[c+1], t.heap[c]) {
			c++
		}
		if !sessionLess(t.heap[c], t.heap[i]) {
			break
		}
		t.swap(i, c)
		i = c
	}
	return i > start
}

func (t *sessionTable) fix(i int) {
	if !t.down(i) {
		t.up(i)
	}
}

func (t *sessionTable) remove(i int) {
	last := len(t.heap) - 1
	x := t.heap[i]
	if i != last {
		t.swap(i, last)
	}
	t.heap[last] = nil
	t.heap = t.heap[:last]
	x.idx = -1
	if i != last {
		t.fix(i)
	}
}
