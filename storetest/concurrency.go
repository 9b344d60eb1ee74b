package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/lobbyhost/lobbyhost/store"
)

// counter encodes n as record data; readCounter decodes it.
func counter(n int) []byte { return strconv.AppendInt(nil, int64(n), 10) }

func readCounter(b []byte) (int, error) {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return 0, fmt.Errorf("record data %q is not a counter: %w", b, err)
	}
	return n, nil
}

// checkConcurrentWriters: goroutines racing conditional writes on one lobby
// get exactly one winner per version, and no update is lost: a counter that
// every winner increments ends equal to the number of wins, and the log
// holds exactly one entry per version.
func checkConcurrentWriters(h *harness) {
	const id = "lobby-contended"
	const goroutines, rounds, perGoroutine = 8, 40, 25
	h.write(store.Write{ID: id, Data: counter(0)})

	// Phase 1, lockstep: in each round every goroutine loads the same
	// version, then all write it at once. Exactly one may win.
	for r := range rounds {
		base := uint64(r + 1)
		var loadedAll, doneAll sync.WaitGroup
		release := make(chan struct{})
		loads := make([]store.Record, goroutines)
		loadErrs := make([]error, goroutines)
		writeErrs := make([]error, goroutines)
		for g := range goroutines {
			loadedAll.Add(1)
			doneAll.Add(1)
			go func() {
				defer doneAll.Done()
				loads[g], loadErrs[g] = h.s.Load(h.ctx, id)
				loadedAll.Done()
				select {
				case <-release:
				case <-h.ctx.Done():
					return
				}
				if loadErrs[g] != nil {
					return
				}
				n, err := readCounter(loads[g].Data)
				if err != nil {
					loadErrs[g] = err
					return
				}
				writeErrs[g] = h.s.Write(h.ctx, store.Write{
					ID: id, Expected: loads[g].Version, Data: counter(n + 1), At: t0, Effects: counter(n + 1),
				})
			}()
		}
		h.wait(&loadedAll, fmt.Sprintf("round %d's loads", r))
		close(release)
		h.wait(&doneAll, fmt.Sprintf("round %d's writes", r))

		winners := 0
		for g := range goroutines {
			if loadErrs[g] != nil {
				h.t.Fatalf("round %d: Load(%q) = %v", r, id, loadErrs[g])
			}
			if loads[g].Version != base {
				h.t.Fatalf("round %d: Load(%q) before any write of the round showed version %d, want %d", r, id, loads[g].Version, base)
			}
			switch err := writeErrs[g]; {
			case err == nil:
				winners++
			case !errors.Is(err, store.ErrConflict):
				h.t.Fatalf("round %d: losing Write(%q, %d) = %v, want %v", r, id, base, err, store.ErrConflict)
			}
		}
		if winners != 1 {
			h.t.Fatalf("round %d: %d of %d writes expecting version %d succeeded, want exactly 1", r, winners, goroutines, base)
		}
	}
	h.expectRecord(store.Record{ID: id, Version: rounds + 1, Data: counter(rounds)})

	// Phase 2, free running: each goroutine retries until it has won
	// perGoroutine increments.
	var wins atomic.Int64
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for won := 0; won < perGoroutine; {
				r, err := h.s.Load(h.ctx, id)
				if err != nil {
					errs[g] = fmt.Errorf("Load(%q) = %w", id, err)
					return
				}
				n, err := readCounter(r.Data)
				if err != nil {
					errs[g] = err
					return
				}
				err = h.s.Write(h.ctx, store.Write{
					ID: id, Expected: r.Version, Data: counter(n + 1), At: t0, Effects: counter(n + 1),
				})
				switch {
				case err == nil:
					won++
					wins.Add(1)
				case !errors.Is(err, store.ErrConflict):
					errs[g] = fmt.Errorf("Write(%q, %d) = %w, want nil or %w", id, r.Version, err, store.ErrConflict)
					return
				}
			}
		})
	}
	h.wait(&wg, "the free-running writers")
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	total := rounds + int(wins.Load())
	r := h.load(id)
	n, err := readCounter(r.Data)
	if err != nil {
		h.t.Fatal(err)
	}
	if n != total || r.Version != uint64(total)+1 {
		h.t.Fatalf("after %d winning writes: counter %d at version %d, want counter %d at version %d (lost updates)",
			total, n, r.Version, total, total+1)
	}

	// One entry per version, in version order (version 1 had none).
	var want []store.Entry
	for v := 2; v <= total+1; v++ {
		want = append(want, store.Entry{Lobby: id, Version: uint64(v), Data: counter(v - 1)})
	}
	h.expectLog(id, 0, want)
}
