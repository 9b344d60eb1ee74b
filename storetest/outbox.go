package storetest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/lobbyhost/lobbyhost/store"
)

// checkOutboxOrder: Pending returns events oldest write first, the events of
// a write in the order given, and a limit returns a prefix of that order.
func checkOutboxOrder(h *harness) {
	writes := []struct {
		id     string
		events []string
	}{
		{"lobby-b", []string{"b1", "b2"}},
		{"lobby-a", []string{"a1"}},
		{"lobby-b", []string{"b3"}},
		{"lobby-c", nil},
		{"lobby-a", []string{"a2", "a3", "a4"}},
		{"lobby-c", []string{"c1"}},
		{"lobby-b", []string{"b4"}},
	}
	version := map[string]uint64{}
	seq := map[string]uint64{}
	var want []store.Event
	for _, w := range writes {
		var events []store.Event
		for _, data := range w.events {
			seq[w.id] += 10 // Seq need not be dense
			events = append(events, ev(w.id, seq[w.id], data))
		}
		h.write(store.Write{ID: w.id, Expected: version[w.id], Data: []byte("x"), Events: events})
		version[w.id]++
		want = append(want, events...)
	}
	h.expectPending(want)
	for limit := 1; limit <= len(want)+1; limit++ {
		wantPrefix := want[:min(limit, len(want))]
		if d := diff(wantPrefix, h.pending(limit)); d != "" {
			h.t.Fatalf("Pending(%d) is not the first %d events (-want +got):\n%s", limit, len(wantPrefix), d)
		}
	}
}

// checkOutboxRedelivery: events stay pending until acknowledged, whatever
// order the acks come in; acking unknown or acknowledged events is a no-op.
func checkOutboxRedelivery(h *harness) {
	const a, b = "lobby-a", "lobby-b"
	h.write(store.Write{ID: a, Data: []byte("x"), Events: []store.Event{ev(a, 1, "a1"), ev(a, 2, "a2")}})
	h.write(store.Write{ID: b, Data: []byte("x"), Events: []store.Event{ev(b, 1, "b1")}})
	h.write(store.Write{ID: a, Expected: 1, Data: []byte("x"), Events: []store.Event{ev(a, 3, "a3")}})
	all := []store.Event{ev(a, 1, "a1"), ev(a, 2, "a2"), ev(b, 1, "b1"), ev(a, 3, "a3")}

	// Reading does not consume.
	for range 3 {
		h.expectPending(all)
	}
	if d := diff(all[:2], h.pending(2)); d != "" {
		h.t.Fatalf("Pending(2) (-want +got):\n%s", d)
	}
	h.expectPending(all)

	// Out-of-order ack, with Data that differs from what was stored.
	h.ack(store.Event{Lobby: a, Seq: 2, Data: []byte("ignored")})
	h.expectPending([]store.Event{all[0], all[2], all[3]})

	// Unknown and repeated acks change nothing.
	h.ack(
		store.Event{Lobby: a, Seq: 2},   // acknowledged already
		store.Event{Lobby: a, Seq: 4},   // never written
		store.Event{Lobby: "c", Seq: 1}, // unknown lobby
		store.Event{Lobby: "lobby-", Seq: 1},
		store.Event{Lobby: "", Seq: 1},
	)
	h.ack()
	if err := h.s.Ack(h.ctx, nil); err != nil {
		h.t.Fatalf("Ack(nil) = %v, want nil", err)
	}
	h.expectPending([]store.Event{all[0], all[2], all[3]})

	// Acknowledging everything empties the outbox.
	// An unknown event first does not stop the known ones after it.
	h.ack(store.Event{Lobby: "zz", Seq: 9}, all[3], store.Event{Lobby: a, Seq: 77}, all[0])
	h.expectPending([]store.Event{all[2]})
	h.ack(all...)
	h.expectPending(nil)
}

// checkOutboxAtomic: the events of a Write are stored with its record or not
// at all. Refused writes leave no events; under concurrent writers, an
// observer never sees a record without its events, nor events without their
// record.
func checkOutboxAtomic(h *harness) {
	const id = "lobby-atomic"
	h.write(store.Write{ID: id, Data: []byte("1"), Events: []store.Event{ev(id, 1, "1")}})
	h.writeErr(store.Write{ID: id, Expected: 0, Data: []byte("conflict"), Events: []store.Event{ev(id, 2, "conflict")}}, store.ErrConflict)
	h.writeErr(store.Write{ID: id, Expected: 7, Data: []byte("conflict"), Events: []store.Event{ev(id, 2, "conflict")}}, store.ErrConflict)
	h.writeErr(store.Write{ID: id, Expected: 1, Data: []byte("invalid"), Events: []store.Event{ev(id, 2, "ok"), ev("x", 3, "bad")}}, store.ErrInvalid)
	h.expectPending([]store.Event{ev(id, 1, "1")})
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("1")})
	h.ack(ev(id, 1, ""))

	// Concurrent: writers race on two lobbies; each winning write of
	// version v carries the event with Seq v. An observer alternates
	// Load-then-Pending and Pending-then-Load and checks both directions.
	const writers, perLobby = 4, 200
	lobbies := []string{"atomic-x", "atomic-y"}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		stop     = make(chan struct{})
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	wins := make([]int, len(lobbies))
	for w := range writers {
		wg.Go(func() {
			li := w % len(lobbies)
			id := lobbies[li]
			for {
				mu.Lock()
				done := wins[li] >= perLobby || len(failures) > 0
				mu.Unlock()
				if done {
					return
				}
				r, err := h.s.Load(h.ctx, id)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					fail("Load(%q) = %v", id, err)
					return
				}
				v := r.Version + 1
				err = h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: fmt.Appendf(nil, "%d", v),
					Events: []store.Event{{Lobby: id, Seq: v, Data: fmt.Appendf(nil, "%d", v)}}})
				switch {
				case err == nil:
					mu.Lock()
					wins[li]++
					mu.Unlock()
				case errors.Is(err, store.ErrConflict):
				default:
					fail("Write(%q, %d) = %v", id, r.Version, err)
					return
				}
			}
		})
	}
	// The observer acknowledges what it has seen, so Pending stays short
	// and the loop fast; delivered is everything it acknowledged, in the
	// order Pending returned it.
	var delivered []store.Event
	acked := map[string]map[uint64]bool{}
	for _, id := range lobbies {
		acked[id] = map[uint64]bool{}
	}
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		pending := func() ([]store.Event, bool) {
			p, err := h.s.Pending(h.ctx, 1000)
			if err != nil {
				fail("observer: Pending = %v", err)
				return nil, false
			}
			return p, true
		}
		load := func(id string) (uint64, bool) {
			r, err := h.s.Load(h.ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				fail("observer: Load(%q) = %v", id, err)
				return 0, false
			}
			return r.Version, true
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := lobbies[(i/2)%len(lobbies)]
			var p []store.Event
			if i%2 == 0 {
				// Record first: every version it shows has its event.
				v, ok := load(id)
				if !ok {
					return
				}
				if p, ok = pending(); !ok {
					return
				}
				seen := map[uint64]bool{}
				for _, e := range p {
					if e.Lobby == id {
						seen[e.Seq] = true
					}
				}
				for s := uint64(1); s <= v; s++ {
					if !seen[s] && !acked[id][s] {
						fail("Load(%q) showed version %d, but the event of version %d was neither pending afterwards nor acknowledged before", id, v, s)
						return
					}
				}
			} else {
				// Events first: every event has its record.
				var ok bool
				if p, ok = pending(); !ok {
					return
				}
				v, ok := load(id)
				if !ok {
					return
				}
				for _, e := range p {
					if e.Lobby == id && e.Seq > v {
						fail("Pending showed event %d of %q, but Load afterwards showed version %d", e.Seq, id, v)
						return
					}
				}
			}
			for _, e := range p {
				if acked[e.Lobby] == nil {
					fail("Pending returned event %d of %q, a lobby nobody wrote during this check", e.Seq, e.Lobby)
					return
				}
				if acked[e.Lobby][e.Seq] {
					fail("event %d of %q pending again after it was acknowledged", e.Seq, e.Lobby)
					return
				}
				acked[e.Lobby][e.Seq] = true
			}
			delivered = append(delivered, p...)
			if err := h.s.Ack(h.ctx, p); err != nil {
				fail("observer: Ack = %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-observed
	for _, f := range failures {
		h.t.Error(f)
	}
	if h.t.Failed() {
		return
	}

	// Finally: every version delivered exactly once, in version order per
	// lobby.
	delivered = append(delivered, h.pending(len(lobbies)*perLobby+10)...)
	got := map[string][]uint64{}
	for _, e := range delivered {
		got[e.Lobby] = append(got[e.Lobby], e.Seq)
	}
	for li, id := range lobbies {
		r := h.load(id)
		var want []uint64
		for v := uint64(1); v <= r.Version; v++ {
			want = append(want, v)
		}
		if int(r.Version) != wins[li] {
			h.t.Errorf("lobby %q: version %d after %d winning writes", id, r.Version, wins[li])
		}
		if d := diff(want, got[id]); d != "" {
			h.t.Errorf("lobby %q: delivered Seqs are not one per version in order (-want +got):\n%s", id, d)
		}
	}
}
