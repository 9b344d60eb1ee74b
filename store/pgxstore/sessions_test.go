package pgxstore

import (
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// TestExpiredSessionsForget: ExpiredSessions deletes the rows of sessions
// over that hold nothing, those before the last one it lists, and keeps
// the rows of the sessions it lists and of those still alive, so the
// sessions table holds only what is alive or still to be swept.
func TestExpiredSessionsForget(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	base := time.Unix(1_800_000_000, 0)
	for i, id := range []string{"idle-1", "held-2", "idle-3", "held-4", "idle-5", "alive"} {
		d := base.Add(time.Duration(i) * time.Second)
		if id == "alive" {
			d = base.Add(time.Hour)
		}
		if err := s.OpenSession(ctx, id, d); err != nil {
			t.Fatal(err)
		}
	}
	write(t, s, store.Write{ID: "l2", Data: []byte("x"), Sessions: []string{"held-2"}})
	write(t, s, store.Write{ID: "l4", Data: []byte("x"), Sessions: []string{"alive", "held-4"}})
	rows := func() []string {
		t.Helper()
		r, err := s.pool.Query(ctx, s.sql(`SELECT convert_from(id, 'UTF8') FROM _S_.sessions ORDER BY id`))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []string
		for r.Next() {
			var id string
			if err := r.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	now := base.Add(time.Minute)
	// Limit 1: lists held-2, forgets idle-1 before it, not idle-3 after.
	got, err := s.ExpiredSessions(ctx, now, 1)
	if err != nil || len(got) != 1 || got[0].ID != "held-2" {
		t.Fatalf("ExpiredSessions(limit 1) = %v, %v; want held-2", got, err)
	}
	if r := rows(); len(r) != 5 || r[0] != "alive" || r[1] != "held-2" || r[2] != "held-4" || r[3] != "idle-3" || r[4] != "idle-5" {
		t.Fatalf("sessions after the first call = %q, want idle-1 gone and the rest kept", r)
	}
	got, err = s.ExpiredSessions(ctx, now, 10)
	if err != nil || len(got) != 2 || got[0].ID != "held-2" || got[1].ID != "held-4" {
		t.Fatalf("ExpiredSessions(limit 10) = %v, %v; want held-2, held-4", got, err)
	}
	if r := rows(); len(r) != 3 || r[0] != "alive" || r[1] != "held-2" || r[2] != "held-4" {
		t.Fatalf("sessions after the second call = %q, want alive, held-2, held-4", r)
	}
}
