package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// countClaims is a Claimer that counts its calls.
type countClaims struct{ n *int }

func (c countClaims) Claim(context.Context, time.Time, int, time.Duration) ([]store.Due, error) {
	*c.n++
	return nil, nil
}

// ComposeWith offers exactly the capabilities passed, for every
// combination, and Compose never offers Sessions.
func TestComposeOffersExactlyWhatIsPassed(t *testing.T) {
	mem := memstore.New() // a Claimer, Notifier, BatchWriter and Sessions itself
	claims := 0
	for mask := range 16 {
		var caps store.Capabilities
		if mask&1 != 0 {
			caps.Claimer = countClaims{&claims}
		}
		if mask&2 != 0 {
			caps.Notifier = mem
		}
		if mask&4 != 0 {
			caps.BatchWriter = mem
		}
		if mask&8 != 0 {
			caps.Sessions = mem
		}
		got := store.ComposeWith(mem, caps)
		if d := store.Of(got); (d.Claimer != nil) != (caps.Claimer != nil) || (d.Notifier != nil) != (caps.Notifier != nil) ||
			(d.BatchWriter != nil) != (caps.BatchWriter != nil) || (d.Sessions != nil) != (caps.Sessions != nil) {
			t.Errorf("mask %04b: offers %+v", mask, d)
		}
		if cl, ok := got.(store.Claimer); ok {
			before := claims
			if _, err := cl.Claim(context.Background(), time.Now(), 1, time.Second); err != nil || claims != before+1 {
				t.Errorf("mask %04b: Claim went elsewhere than the Claimer passed", mask)
			}
		}
		if ss, ok := got.(store.Sessions); ok {
			if err := ss.OpenSession(context.Background(), fmt.Sprint("s", mask), time.Unix(1, 0)); err != nil {
				t.Errorf("mask %04b: OpenSession: %v", mask, err)
			}
		}
		// The Store methods are s's own.
		if err := got.Write(context.Background(), store.Write{ID: "l", Expected: uint64(mask), Data: []byte{1}}); err != nil {
			t.Errorf("mask %04b: Write: %v", mask, err)
		}
		if mask < 8 {
			old := store.Compose(mem, caps.Claimer, caps.Notifier, caps.BatchWriter)
			if a, b := offered(old), offered(got); a != b {
				t.Errorf("mask %04b: Compose offers %v, ComposeWith %v", mask, a, b)
			}
		}
	}
	rec, err := mem.Load(context.Background(), "l")
	if err != nil || rec.Version != 16 {
		t.Errorf("Load = version %d, %v; want 16 writes through the composed stores", rec.Version, err)
	}
	deadlines, err := mem.SessionDeadlines(context.Background(), []string{"s8", "s15"})
	if err != nil || !deadlines[0].Equal(time.Unix(1, 0)) || !deadlines[1].Equal(time.Unix(1, 0)) {
		t.Errorf("SessionDeadlines = %v, %v; want the sessions opened through the composed stores", deadlines, err)
	}
	if _, ok := store.Compose(mem, mem, mem, mem).(store.Sessions); ok {
		t.Error("Compose offers Sessions")
	}
}

// offered says which capabilities s offers.
func offered(s store.Store) [4]bool {
	c := store.Of(s)
	return [4]bool{c.Claimer != nil, c.Notifier != nil, c.BatchWriter != nil, c.Sessions != nil}
}
