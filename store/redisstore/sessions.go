package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// encodeList is Write.Sessions as the write script reads it (listOf):
// each ID as its length in decimal, ':' and its bytes; "" for none.
func encodeList(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.Itoa(len(id)))
		b.WriteByte(':')
		b.WriteString(id)
	}
	return b.String()
}

// home is the shard that holds the session records and their deadline
// index: sessions are one per process, so one slot carries them easily.
func (s *Store) home() *shard { return &s.shards[0] }

func (h *shard) sessionDue() string { return h.tag + "sdue" }

// sessionIndex is the key of session id's set of lobbies in shard sh.
func (sh *shard) sessionIndex(id string) string { return sh.tag + "sl:" + id }

// sessionCounts is the key of shard sh's count of lobbies per session.
func (sh *shard) sessionCounts() string { return sh.tag + "sh" }

func sessionArgs(op, id string, t time.Time) error {
	if id == "" {
		return fmt.Errorf("redisstore: %w: %s with an empty session ID", store.ErrInvalid, op)
	}
	if t.IsZero() {
		return fmt.Errorf("redisstore: %w: %s %q with the zero time", store.ErrInvalid, op, id)
	}
	return nil
}

// OpenSession records a new session alive until deadline, in the home
// shard: store.ErrConflict if the ID is known.
func (s *Store) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sessionArgs("open session", id, deadline); err != nil {
		return err
	}
	h := s.home()
	n, err := s.openSession.exec(ctx, s.c, []string{h.sessionDue()}, []string{h.tag, id, deadlineKey(deadline)}).AsInt64()
	if err != nil {
		return fmt.Errorf("redisstore: open session %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: open session %q: %w", id, store.ErrConflict)
	}
	return nil
}

// RenewSession moves a live session's deadline forward in one script;
// store.ErrSessionEnded if it is unknown, ended or due at now.
func (s *Store) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sessionArgs("renew session", id, deadline); err != nil {
		return err
	}
	h := s.home()
	n, err := s.renewSession.exec(ctx, s.c, []string{h.sessionDue()}, []string{h.tag, id, deadlineKey(now), deadlineKey(deadline)}).AsInt64()
	if err != nil {
		return fmt.Errorf("redisstore: renew session %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: renew session %q: %w", id, store.ErrSessionEnded)
	}
	return nil
}

// EndSession sets a known session's deadline to min(current, at) and ends
// its renewals.
func (s *Store) EndSession(ctx context.Context, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sessionArgs("end session", id, at); err != nil {
		return err
	}
	h := s.home()
	if err := s.endSession.exec(ctx, s.c, []string{h.sessionDue()}, []string{h.tag, id, deadlineKey(at)}).Error(); err != nil {
		return fmt.Errorf("redisstore: end session %q: %w", id, err)
	}
	return nil
}

// SessionDeadlines reads every deadline in one script of the home shard.
func (s *Store) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]time.Time, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	h := s.home()
	args := append([]string{h.tag}, ids...)
	// The script builds the record keys from the home tag; the deadline
	// index, a key of the same slot, routes it there.
	vals, err := s.sessionDeadlines.exec(ctx, s.c, []string{h.sessionDue()}, args).ToArray()
	if err != nil {
		return nil, fmt.Errorf("redisstore: session deadlines: %w", err)
	}
	if len(vals) != len(ids) {
		return nil, fmt.Errorf("%w: session deadlines: %d values for %d IDs", ErrCorrupt, len(vals), len(ids))
	}
	for i, v := range vals {
		if v.IsNil() {
			continue
		}
		k, _ := v.ToString()
		t, ok := parseDeadlineKey(k)
		if !ok {
			return nil, fmt.Errorf("%w: session %q has deadline %q", ErrCorrupt, ids[i], k)
		}
		out[i] = t
	}
	return out, nil
}

// expiredBatch is how many due sessions ExpiredSessions reads at a time.
const expiredBatch = 128

// ExpiredSessions walks the home shard's deadline index in order, asks
// every shard which of the due sessions hold a lobby there, lists those
// that hold one anywhere and forgets those before the last listed that
// hold none (see docs/redis.md on what this costs across slots).
func (s *Store) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: expired sessions: limit %d", store.ErrInvalid, limit)
	}
	h := s.home()
	bound := "+"
	if k, ok := afterKey(now); ok {
		bound = "(" + k
	}
	var (
		out    []store.SessionDeadline
		forget []string
	)
	for offset := 0; len(out) < limit; offset += expiredBatch {
		vals, err := s.dueSessions.exec(ctx, s.c, []string{h.sessionDue()},
			[]string{bound, strconv.Itoa(offset), strconv.Itoa(expiredBatch)}).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: expired sessions: %w", err)
		}
		ids := make([]string, len(vals))
		deadlines := make([]time.Time, len(vals))
		for i, m := range vals {
			t, ok := parseDeadlineKey(m[:min(len(m), deadlineKeyLen)])
			if !ok || len(m) <= deadlineKeyLen {
				return nil, fmt.Errorf("%w: session deadline index member %q", ErrCorrupt, m)
			}
			ids[i], deadlines[i] = m[deadlineKeyLen:], t
		}
		held, err := s.holding(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			if len(out) == limit {
				break
			}
			if held[i] {
				out = append(out, store.SessionDeadline{ID: id, Deadline: deadlines[i]})
			} else {
				forget = append(forget, vals[i])
			}
		}
		if len(vals) < expiredBatch {
			break
		}
	}
	if len(forget) > 0 {
		args := append([]string{h.tag}, forget...)
		if err := s.forgetSessions.exec(ctx, s.c, []string{h.sessionDue(), h.sessionCounts()}, args).Error(); err != nil {
			return nil, fmt.Errorf("redisstore: expired sessions: forgetting: %w", err)
		}
	}
	return out, nil
}

// holding reports, for each session, whether some shard's index holds a
// lobby for it: one script per shard, pipelined.
func (s *Store) holding(ctx context.Context, ids []string) ([]bool, error) {
	held := make([]bool, len(ids))
	if len(ids) == 0 {
		return held, nil
	}
	multi := make([]rueidis.LuaExec, len(s.shards))
	for k := range s.shards {
		multi[k] = rueidis.LuaExec{Keys: []string{s.shards[k].sessionCounts()}, Args: ids}
	}
	for k, r := range s.held.execMulti(ctx, s.c, multi) {
		vals, err := r.AsIntSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: expired sessions: shard %d: %w", k, err)
		}
		if len(vals) != len(ids) {
			return nil, fmt.Errorf("%w: expired sessions: shard %d answered %d of %d sessions", ErrCorrupt, k, len(vals), len(ids))
		}
		for i, v := range vals {
			held[i] = held[i] || v == 1
		}
	}
	return held, nil
}

// SessionLobbies reads the session's index set of every shard (one script
// per shard, pipelined) and merges them in byte order.
func (s *Store) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: session lobbies %q: limit %d", store.ErrInvalid, id, limit)
	}
	if id == "" {
		return nil, nil
	}
	lower := "-"
	if after != "" {
		lower = "(" + after
	}
	multi := make([]rueidis.LuaExec, len(s.shards))
	for k := range s.shards {
		multi[k] = rueidis.LuaExec{Keys: []string{s.shards[k].sessionIndex(id)}, Args: []string{lower, strconv.Itoa(limit)}}
	}
	var out []string
	for k, r := range s.sessionLobbies.execMulti(ctx, s.c, multi) {
		vals, err := r.AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: session lobbies %q: shard %d: %w", id, k, err)
		}
		out = append(out, vals...)
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out, nil
}
