package storetest_test

import (
	"cmp"
	"context"
	"path"
	"slices"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// simpleSession is one session of simpleStore: opened, or only named by
// some lobby's last write.
type simpleSession struct {
	deadline time.Time
	opened   bool
	ended    bool
	lobbies  map[string]string // lobby key → lobby ID
}

func (s *simpleStore) sessionCtxErr(ctx context.Context) error {
	if s.flaw == sessionsIgnoreContext {
		return nil
	}
	return s.ctxErr(ctx)
}

// session returns the session id, made if missing; the caller holds mu.
func (s *simpleStore) session(id string) *simpleSession {
	x := s.sessions[id]
	if x == nil {
		x = &simpleSession{lobbies: map[string]string{}}
		s.sessions[id] = x
	}
	return x
}

// reindex makes the sessions of lobby k (ID id) exactly sess; the caller
// holds mu.
func (s *simpleStore) reindex(k, id string, sess []string) {
	for _, old := range s.sessHeld[k] {
		if slices.Contains(sess, old) || s.flaw == sessionIndexKeepsDropped && sess != nil {
			continue
		}
		if x := s.sessions[old]; x != nil {
			delete(x.lobbies, k)
			if !x.opened && len(x.lobbies) == 0 {
				delete(s.sessions, old)
			}
		}
	}
	for _, now := range sess {
		s.session(now).lobbies[k] = id
	}
	if s.flaw == sessionIndexKeepsDropped && sess != nil {
		sess = append(slices.Clone(s.sessHeld[k]), sess...)
		slices.Sort(sess)
		sess = slices.Compact(sess)
	}
	if len(sess) == 0 {
		delete(s.sessHeld, k)
	} else {
		s.sessHeld[k] = slices.Clone(sess)
	}
}

func (s *simpleStore) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	if err := s.sessionCtxErr(ctx); err != nil {
		return err
	}
	if id == "" || deadline.IsZero() {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.session(id)
	if x.opened && s.flaw != sessionReopenOverwrites {
		return store.ErrConflict
	}
	x.opened, x.ended, x.deadline = true, false, deadline.Round(0)
	return nil
}

// alive reports whether x may be renewed at now; the caller holds mu.
func (s *simpleStore) alive(x *simpleSession, now time.Time) bool {
	if x == nil || !x.opened || (x.ended && s.flaw != sessionEndRenewable) {
		return false
	}
	if s.flaw == sessionRenewAtDeadline {
		return !now.After(x.deadline)
	}
	return now.Before(x.deadline)
}

func (s *simpleStore) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if err := s.sessionCtxErr(ctx); err != nil {
		return err
	}
	if id == "" || deadline.IsZero() {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.sessions[id]
	if s.flaw == sessionRenewUpserts && (x == nil || !x.opened) {
		x = s.session(id)
		x.opened, x.deadline = true, deadline.Round(0)
		return nil
	}
	if !s.alive(x, now) {
		return store.ErrSessionEnded
	}
	switch s.flaw {
	case sessionDeadlineBackward:
		x.deadline = deadline.Round(0)
	case sessionRenewSplit:
		read := x.deadline
		s.mu.Unlock()
		window()
		s.mu.Lock()
		x.deadline = maxTime(read, deadline.Round(0))
	default:
		x.deadline = maxTime(x.deadline, deadline.Round(0))
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *simpleStore) EndSession(ctx context.Context, id string, at time.Time) error {
	if err := s.sessionCtxErr(ctx); err != nil {
		return err
	}
	if id == "" || at.IsZero() {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.sessions[id]
	if x == nil || !x.opened {
		return nil
	}
	x.ended = true
	if s.flaw == sessionEndExtends || at.Before(x.deadline) && s.flaw != expiredIgnoresEnd {
		x.deadline = at.Round(0)
	}
	return nil
}

func (s *simpleStore) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	if err := s.sessionCtxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Time, len(ids))
	for i, id := range ids {
		if x := s.sessions[id]; x != nil && x.opened {
			out[i] = x.deadline
		}
	}
	return out, nil
}

// ExpiredSessions scans every session: the suite sees results, not costs.
func (s *simpleStore) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	if err := s.sessionCtxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.SessionDeadline
	for id, x := range s.sessions {
		due := !x.deadline.After(now)
		if s.flaw == expiredExclusive {
			due = x.deadline.Before(now)
		}
		if !x.opened || !due {
			continue
		}
		if len(x.lobbies) == 0 || s.flaw == sessionForgetsHolding {
			x.opened = false
			if len(x.lobbies) == 0 {
				delete(s.sessions, id)
			}
			continue
		}
		out = append(out, store.SessionDeadline{ID: id, Deadline: x.deadline})
	}
	slices.SortFunc(out, func(a, b store.SessionDeadline) int {
		if s.flaw == expiredByID {
			return cmp.Compare(a.ID, b.ID)
		}
		return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.ID, b.ID))
	})
	out = out[:min(len(out), limit)]
	if s.flaw == expiredPops {
		for _, d := range out {
			s.sessions[d.ID].opened = false
		}
	}
	return out, nil
}

func (s *simpleStore) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := s.sessionCtxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sid, x := range s.sessions {
		if sid != id {
			if ok, err := path.Match(id, sid); s.flaw != sessionLobbiesGlob || !ok || err != nil {
				continue
			}
		}
		for _, l := range x.lobbies {
			if l > after && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out[:min(len(out), limit)], nil
}
