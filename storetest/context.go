package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// checkContextCancelled: with a cancelled or expired context every method
// returns promptly with the context's error and writes nothing.
func checkContextCancelled(h *harness) {
	const id, fresh = "lobby-ctx", "lobby-ctx-new"
	h.write(store.Write{ID: id, Data: []byte("v1"), Deadline: t0, Effects: []byte("e1")})
	h.register("ctx-reader")
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("v2"), Deadline: t0, Effects: []byte("e2")}) // for ctx-reader, after 1

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()

	for i, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"expired", expired, context.DeadlineExceeded},
	} {
		before := h.state(id, fresh)
		claimAt := later.Add(time.Duration(i) * time.Second)
		calls := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"Load", func(ctx context.Context) error { _, err := h.s.Load(ctx, id); return err }},
			{"Load of a missing lobby", func(ctx context.Context) error { _, err := h.s.Load(ctx, fresh); return err }},
			{"Write", func(ctx context.Context) error {
				return h.s.Write(ctx, store.Write{ID: id, Expected: 2, Data: []byte("v3"), Deadline: t0.Add(-time.Hour),
					At: t0, Effects: []byte("e3")})
			}},
			{"Write creating a lobby", func(ctx context.Context) error {
				return h.s.Write(ctx, store.Write{ID: fresh, Data: []byte("new"), Deadline: t0, At: t0, Effects: []byte("e")})
			}},
			{"Delete", func(ctx context.Context) error {
				return h.s.Delete(ctx, store.Deletion{ID: id, Expected: 2, Floor: 10})
			}},
			{"Due", func(ctx context.Context) error { _, err := h.s.Due(ctx, later, 10); return err }},
			{"ReadLog", func(ctx context.Context) error { _, err := h.s.ReadLog(ctx, id, 0, 10); return err }},
			{"LogHeads", func(ctx context.Context) error { _, err := h.s.LogHeads(ctx, []string{id, fresh}); return err }},
			{"TrimLog", func(ctx context.Context) error {
				_, err := h.s.TrimLog(ctx, later.Add(100*365*24*time.Hour), 10)
				return err
			}},
			{"RegisterConsumer", func(ctx context.Context) error { return h.s.RegisterConsumer(ctx, "ctx-never") }},
			{"ClaimLog", func(ctx context.Context) error {
				_, err := h.s.ClaimLog(ctx, "ctx-reader", claimAt, 10, time.Hour)
				return err
			}},
			{"ClaimLog of a new name", func(ctx context.Context) error {
				_, err := h.s.ClaimLog(ctx, "ctx-never-2", claimAt, 10, time.Hour)
				return err
			}},
			{"CommitLog", func(ctx context.Context) error { return h.s.CommitLog(ctx, "ctx-reader", id, 2) }},
		}
		if cl, ok := h.s.(store.Claimer); ok {
			calls = append(calls, struct {
				name string
				call func(ctx context.Context) error
			}{"Claim", func(ctx context.Context) error { _, err := cl.Claim(ctx, claimAt, 10, time.Hour); return err }})
		}
		if n, ok := h.s.(store.Notifier); ok {
			calls = append(calls, struct {
				name string
				call func(ctx context.Context) error
			}{"Subscribe", func(ctx context.Context) error { _, err := n.Subscribe(ctx); return err }})
		}
		for _, call := range calls {
			var err error
			within(h.t, fmt.Sprintf("%s with a %s context", call.name, c.name), func() { err = call.call(c.ctx) })
			if !errors.Is(err, c.want) {
				h.t.Errorf("%s with a %s context = %s, want %v", call.name, c.name, describe(err), c.want)
			}
		}
		h.unchanged(before, "calls with a "+c.name+" context")
		// Nor registered a consumer, claimed or committed anything.
		if d := diff([]store.Cursor{{Lobby: id, After: 1}}, h.claimLog("ctx-reader", claimAt, 10, time.Nanosecond)); d != "" {
			h.t.Fatalf("ClaimLog(ctx-reader) after ClaimLog and CommitLog with a %s context (-want +got):\n%s", c.name, d)
		}
		for _, name := range []string{"ctx-never", "ctx-never-2"} {
			if err := h.s.CommitLog(h.ctx, name, id, 1); !errors.Is(err, store.ErrInvalid) {
				h.t.Fatalf("CommitLog(%q) after RegisterConsumer or ClaimLog with a %s context = %s, want %v: the name got registered",
					name, c.name, describe(err), store.ErrInvalid)
			}
		}
		// Claim must not have claimed anything either.
		if cl, ok := h.s.(store.Claimer); ok {
			got, err := cl.Claim(h.ctx, claimAt, 10, time.Nanosecond)
			if err != nil {
				h.t.Fatalf("Claim(%v, 10, 1ns) = %v, want nil", claimAt, err)
			}
			if d := diff([]store.Due{{ID: id, Deadline: t0}}, got); d != "" {
				h.t.Fatalf("Claim after a Claim with a %s context (-want +got):\n%s", c.name, d)
			}
		}
	}
}
