package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// TestSessionsForgotten: memory for sessions stays bounded. Sessions over
// that hold nothing go at ExpiredSessions, index entries of sessions never
// opened go with their last lobby, and what remains is the live sessions
// and those still holding a lobby, each once in the heap.
func TestSessionsForgotten(t *testing.T) {
	ctx := context.Background()
	s := New()
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		if err := s.OpenSession(ctx, fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(ctx, store.Write{ID: "l", Data: []byte("x"), Sessions: []string{"ghost", "s7"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, store.Write{ID: "m", Data: []byte("x"), Sessions: []string{"ghost"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ExpiredSessions(ctx, t0.Add(49*time.Second), 10)
	if err != nil || len(got) != 1 || got[0].ID != "s7" {
		t.Fatalf("ExpiredSessions = %v, %v; want s7", got, err)
	}
	// s0..s49 were due: all but s7 are forgotten; s50..s99 live; ghost is
	// indexed without a record.
	if n, h := len(s.sess.byID), len(s.sess.heap); n != 52 || h != 51 {
		t.Fatalf("after ExpiredSessions: %d sessions known, %d in the heap; want 52 (50 live, s7, ghost) and 51", n, h)
	}
	for i, x := range s.sess.heap {
		if x.idx != i {
			t.Fatalf("heap slot %d holds a session that thinks it is at %d", i, x.idx)
		}
	}
	if err := s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "m", Expected: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.sess.byID["ghost"]; ok {
		t.Fatal("a session never opened stays known after its last lobby dropped it")
	}
	if got, err := s.ExpiredSessions(ctx, t0.Add(time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("ExpiredSessions after every lobby was released = %v, %v; want none", got, err)
	}
	if n, h := len(s.sess.byID), len(s.sess.heap); n != 0 || h != 0 {
		t.Fatalf("after every session was over and released: %d sessions known, %d in the heap; want none", n, h)
	}
}
