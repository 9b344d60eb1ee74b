package redisstore

import (
	"sync"
	"testing"
)

// TestWakeChanPokeAfterClose: rueidis may run a subscription callback after
// Notify's goroutine closed the channel; the poke must neither panic (a
// send on a closed channel) nor race with the close (go test -race).
func TestWakeChanPokeAfterClose(t *testing.T) {
	w := newWakeChan()
	w.poke()
	w.poke() // coalesced
	if got := len(w.ch); got != 1 {
		t.Fatalf("%d values buffered after two pokes, want 1", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				w.poke()
			}
		}()
	}
	w.close()
	wg.Wait()
	w.poke()
	w.close()
	n := 0
	for range w.ch {
		n++
	}
	if n > 1 {
		t.Fatalf("%d values after close, want at most 1", n)
	}
}
