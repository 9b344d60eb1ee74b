package storetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

func (h *harness) claim(c store.Claimer, now time.Time, limit int, hold time.Duration, want []store.Due) {
	h.t.Helper()
	got, err := c.Claim(h.ctx, now, limit, hold)
	if err != nil {
		h.t.Fatalf("Claim(%v, %d, %v) = %v, want nil", now, limit, hold, err)
	}
	if d := diff(want, got); d != "" {
		h.t.Fatalf("Claim(%v, %d, %v) mismatch (-want +got):\n%s", now, limit, hold, d)
	}
}

// checkClaim (store.Claimer only): Claim returns what Due would, minus the
// lobbies another Claim holds; a hold lasts until now+hold by the callers'
// clock, a Write releases it, Due ignores it, and concurrent Claims never
// hand out the same lobby twice.
func checkClaim(h *harness) {
	c, ok := h.s.(store.Claimer)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Claimer")
	}
	now := t0
	a := store.Due{ID: "a", Deadline: now.Add(-2 * time.Second)}
	b := store.Due{ID: "b", Deadline: now.Add(-time.Second)}
	h.write(store.Write{ID: "a", Data: []byte("a"), Deadline: a.Deadline})
	h.write(store.Write{ID: "b", Data: []byte("b"), Deadline: b.Deadline})
	h.write(store.Write{ID: "c", Data: []byte("c"), Deadline: now.Add(time.Hour)})
	h.write(store.Write{ID: "d", Data: []byte("d")})

	h.claim(c, now, 10, time.Minute, []store.Due{a, b})
	h.claim(c, now, 10, time.Minute, nil)                                  // held
	h.expectDue(now, 10, []store.Due{a, b})                                // Due ignores claims
	h.claim(c, now.Add(time.Minute-time.Nanosecond), 10, time.Minute, nil) // still held
	h.claim(c, now.Add(time.Minute), 1, time.Minute, []store.Due{a})       // hold over; limit 1
	h.claim(c, now.Add(time.Minute), 10, time.Minute, []store.Due{b})

	// A Write releases the claim, whatever it does to the deadline.
	h.write(store.Write{ID: "b", Expected: 1, Data: []byte("b2"), Deadline: b.Deadline})
	h.claim(c, now.Add(time.Minute+time.Second), 10, time.Minute, []store.Due{b})

	// Concurrent claimers split the due lobbies without overlap.
	const lobbies, claimers = 30, 6
	var all []store.Due
	for i := range lobbies {
		d := store.Due{ID: "many-" + string(rune('A'+i)), Deadline: now.Add(time.Duration(i%7) * time.Millisecond)}
		h.write(store.Write{ID: d.ID, Data: []byte("x"), Deadline: d.Deadline})
		all = append(all, d)
	}
	at := now.Add(time.Hour) // everything above is due; a, b and c's claims are over
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed []store.Due
		errs    []error
	)
	for range claimers {
		wg.Go(func() {
			for {
				got, err := c.Claim(h.ctx, at, 3, time.Hour)
				mu.Lock()
				claimed = append(claimed, got...)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		h.t.Fatalf("concurrent Claim = %v", err)
	}
	want := append(slices.Clone(all), a, b, store.Due{ID: "c", Deadline: now.Add(time.Hour)})
	sortDue(want)
	sortDue(claimed)
	if d := diff(want, claimed); d != "" {
		h.t.Fatalf("%d concurrent claimers: every due lobby claimed exactly once (-want +got):\n%s", claimers, d)
	}
}

// notifyWait bounds the wait for a notification. Shared stores deliver
// them through a server (LISTEN/NOTIFY, pub/sub), in milliseconds.
const notifyWait = 5 * time.Second

// checkNotify (store.Notifier only): a Notify channel receives a value after
// a Write that appends events, every subscriber does, writers never wait
// for a subscriber that does not read, and the channel is closed once its
// context is done. (Writes without events may notify or not.)
func checkNotify(h *harness) {
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier")
	}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	ch1, err := n.Notify(ctx)
	if err != nil {
		h.t.Fatalf("Notify = %v, want nil", err)
	}
	ctx2, cancel2 := context.WithCancel(h.ctx)
	defer cancel2()
	ch2, err := n.Notify(ctx2)
	if err != nil {
		h.t.Fatalf("Notify = %v, want nil", err)
	}
	receive := func(ch <-chan struct{}, after string) {
		h.t.Helper()
		select {
		case _, ok := <-ch:
			if !ok {
				h.t.Fatalf("Notify channel closed after %s while its context is live", after)
			}
		case <-time.After(notifyWait):
			h.t.Fatalf("Notify channel received nothing within %v after %s", notifyWait, after)
		}
	}
	drain := func(ch <-chan struct{}) {
		for {
			select {
			case <-ch:
			default:
				return
			}
		}
	}

	ev := func(seq uint64) []store.Event { return []store.Event{{Lobby: "n", Seq: seq, Data: []byte("e")}} }
	h.write(store.Write{ID: "n", Data: []byte("1"), Deadline: t0, Events: ev(1)})
	receive(ch1, "a Write with events")
	receive(ch2, "a Write with events")

	// Nobody reads ch1 and ch2 now: writes must not wait for them.
	within(h.t, "100 writes with unread Notify channels", func() {
		for v := uint64(1); v <= 100; v++ {
			if h.s.Write(h.ctx, store.Write{ID: "n", Expected: v, Data: []byte("x"), Events: ev(v + 1)}) != nil {
				return
			}
		}
	})
	h.expectRecord(store.Record{ID: "n", Version: 101, Data: []byte("x")})
	receive(ch1, "100 writes with events")
	drain(ch1)

	// Closing: values may still come, then the channel closes.
	cancel()
	closed := false
	deadline := time.After(promptly)
	for !closed {
		select {
		case _, ok := <-ch1:
			closed = !ok
		case <-deadline:
			h.t.Fatalf("Notify channel not closed within %v after its context was cancelled", promptly)
		}
	}
	// The other subscriber lives on.
	drain(ch2)
	h.write(store.Write{ID: "n2", Data: []byte("x"), Events: []store.Event{{Lobby: "n2", Seq: 1, Data: []byte("e")}}})
	receive(ch2, "a Write with events, after another subscriber left")
}

// checkNotifyAfterCommit (store.Notifier only): a value comes only once the
// write it announces is visible, so a reader that reads the outbox only
// when notified sees every write. Here the reader drains its channel, a
// Write with an event starts, and the reader calls Pending after each value
// until it sees the event; a store that notifies before its write is
// visible hands out a value too early, and the reader waits for one that
// never comes.
func checkNotifyAfterCommit(h *harness) {
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier")
	}
	ch, err := n.Notify(h.ctx)
	if err != nil {
		h.t.Fatalf("Notify = %v, want nil", err)
	}
	const id, rounds = "notify-commit", 20
	for v := range uint64(rounds) {
		for drained := false; !drained; {
			select {
			case <-ch:
			default:
				drained = true
			}
		}
		written := make(chan error, 1)
		go func() {
			written <- h.s.Write(h.ctx, store.Write{ID: id, Expected: v, Data: counter(int(v + 1)),
				Events: []store.Event{{Lobby: id, Seq: v + 1, Data: counter(int(v + 1))}}})
		}()
		for seen := false; !seen; {
			select {
			case _, ok := <-ch:
				if !ok {
					h.t.Fatal("Notify channel closed while its context is live")
				}
			case <-time.After(notifyWait):
				h.t.Fatalf("round %d: no notification within %v after which Pending shows the Write's event: "+
					"the store notified before its write was visible, or not at all", v+1, notifyWait)
			}
			for _, e := range h.pending(rounds + 10) {
				seen = seen || e.Seq == v+1
			}
		}
		if err := <-written; err != nil {
			h.t.Fatalf("Write(%q, %d) = %v, want nil", id, v, err)
		}
		h.ack(store.Event{Lobby: id, Seq: v + 1})
	}
}
