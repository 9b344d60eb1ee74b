package redisstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// TestSessionsAcrossShards: a session's lobbies spread over the shards are
// all in its index, SessionLobbies merges them in byte order across the
// shards' pages, and ExpiredSessions lists the session (and does not
// forget it) as long as any shard, home or not, holds one of its lobbies;
// once the last is released it is no longer listed and is forgotten. The
// lobbies are released first to last and, for a second session, last to
// first, so that in one of the two runs the last lobby held is outside
// the home shard.
func TestSessionsAcrossShards(t *testing.T) {
	forShards(t, func(t *testing.T, s *redisstore.Store) {
		for _, reverse := range []bool{false, true} {
			sessionAcrossShards(t, s, fmt.Sprintf("s-%v", reverse), reverse)
		}
	})
}

func sessionAcrossShards(t *testing.T, s *redisstore.Store, sess string, reverse bool) {
	ctx := t.Context()
	if err := s.OpenSession(ctx, sess, t0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("%s-lobby-%02d", sess, i)
		ids = append(ids, id)
		mustWrite(t, s, store.Write{ID: id, Data: []byte("x"), At: t0, Sessions: []string{sess}})
	}
	var got []string
	for after := ""; ; {
		page, err := s.SessionLobbies(ctx, sess, after, 5)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 5 {
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("SessionLobbies(%s) pages = %q, want %q", sess, got, ids)
	}
	if reverse {
		slices.Reverse(ids)
	}
	later := t0.Add(time.Hour)
	for i, id := range ids {
		due, err := s.ExpiredSessions(ctx, later, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 1 || due[0].ID != sess || !due[0].Deadline.Equal(t0) {
			t.Fatalf("with %d lobbies held: ExpiredSessions = %v, want %s at %v", len(ids)-i, due, sess, t0)
		}
		if d, err := s.SessionDeadlines(ctx, []string{sess}); err != nil || !d[0].Equal(t0) {
			t.Fatalf("with %d lobbies held: SessionDeadlines(%s) = %v, %v; want %v (not forgotten)", len(ids)-i, sess, d, err, t0)
		}
		mustWrite(t, s, store.Write{ID: id, Expected: 1, Data: []byte("y"), At: t0})
	}
	due, err := s.ExpiredSessions(ctx, later, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("with no lobby held: ExpiredSessions = %v, %v; want none", due, err)
	}
	if d, err := s.SessionDeadlines(ctx, []string{sess}); err != nil || !d[0].IsZero() {
		t.Fatalf("SessionDeadlines(%s) after it was forgotten = %v, %v; want the zero time", sess, d, err)
	}
}
