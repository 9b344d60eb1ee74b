package store_test

import (
	"context"
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

// Compose offers exactly the capabilities passed, for every combination.
func TestComposeOffersExactlyWhatIsPassed(t *testing.T) {
	mem := memstore.New() // a Claimer, Notifier and BatchWriter itself
	claims := 0
	for mask := range 8 {
		var c store.Claimer
		var n store.Notifier
		var b store.BatchWriter
		if mask&1 != 0 {
			c = countClaims{&claims}
		}
		if mask&2 != 0 {
			n = mem
		}
		if mask&4 != 0 {
			b = mem
		}
		got := store.Compose(mem, c, n, b)
		_, isC := got.(store.Claimer)
		_, isN := got.(store.Notifier)
		_, isB := got.(store.BatchWriter)
		if isC != (c != nil) || isN != (n != nil) || isB != (b != nil) {
			t.Errorf("mask %03b: Claimer %v Notifier %v BatchWriter %v", mask, isC, isN, isB)
		}
		if cl, ok := got.(store.Claimer); ok {
			before := claims
			if _, err := cl.Claim(context.Background(), time.Now(), 1, time.Second); err != nil || claims != before+1 {
				t.Errorf("mask %03b: Claim went elsewhere than the Claimer passed", mask)
			}
		}
		// The Store methods are s's own.
		if err := got.Write(context.Background(), store.Write{ID: "l", Expected: uint64(mask), Data: []byte{1}}); err != nil {
			t.Errorf("mask %03b: Write: %v", mask, err)
		}
	}
	rec, err := mem.Load(context.Background(), "l")
	if err != nil || rec.Version != 8 {
		t.Errorf("Load = version %d, %v; want 8 writes through the composed stores", rec.Version, err)
	}
}
