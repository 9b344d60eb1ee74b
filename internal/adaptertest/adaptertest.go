// Package adaptertest holds test and benchmark helpers shared by this
// repository's store adapters (store/pgxstore and store/redisstore). It is
// not for users: it changes whenever those adapters' tests need it to.
package adaptertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// CheckOutcomes compares the outcomes a WriteBatch returned with want, by
// class: "ok" (nil), "conflict" (store.ErrConflict), "invalid"
// (store.ErrInvalid), or "other" (an error that is neither). A count that
// differs fails the test at once; each outcome of the wrong class is
// reported.
func CheckOutcomes(t testing.TB, got []error, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("WriteBatch returned %d outcomes for %d writes", len(got), len(want))
	}
	for i, err := range got {
		var class string
		switch {
		case err == nil:
			class = "ok"
		case errors.Is(err, store.ErrConflict):
			class = "conflict"
		case errors.Is(err, store.ErrInvalid):
			class = "invalid"
		default:
			class = "other"
		}
		if class != want[i] {
			t.Errorf("outcome %d = %v (%s), want %s", i, err, class, want[i])
		}
	}
}

// BenchBurst runs b.N bursts of one WriteBatch of ws on s, each write of
// which must commit; after each burst every write's Expected moves on by
// one, so ws should be writes to distinct lobbies starting at the lobbies'
// versions. It reports allocations, the time of one burst (ms/burst) and
// writes/s.
func BenchBurst(b *testing.B, s store.BatchWriter, ws []store.Write) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for k, err := range s.WriteBatch(ctx, ws) {
			if err != nil {
				b.Fatalf("write %d: %v", k, err)
			}
			ws[k].Expected++
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/burst")
	b.ReportMetric(float64(b.N*len(ws))/elapsed.Seconds(), "writes/s")
}
