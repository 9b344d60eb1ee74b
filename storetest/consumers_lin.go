package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lobbyhost/lobbyhost/store"
)

// The consumer linearizability check records a history of concurrent
// Writes (each appending an entry), and ClaimLogs and CommitLogs under one
// consumer name whose holds expire as the claimers' now moves on, and asks
// porcupine whether some order of them, each taking effect between its call
// and its return, explains every result with the contract's consumer: per
// lobby a head, a cursor and a claim; ClaimLog returning, with their
// cursors, min(limit, available) of the lobbies with entries after the
// cursor and no claim running at its now, and claiming them until
// now+hold; CommitLog raising the cursor and releasing the claim.

// clinLobbies are the lobbies of the consumer linearizability check.
var clinLobbies = [...]string{"clin-a", "clin-b", "clin-c"}

type clinLobby struct {
	head, cursor uint64
	until        int64 // claimed until, in ticks of the claimers' clock
}

type clinState [len(clinLobbies)]clinLobby

type clinInput struct {
	op       string // "write", "claim", "claim1" (one lobby of a partitioned claim) or "commit"
	lobby    int    // write, commit
	expected uint64 // write
	after    uint64 // commit
	now      int64  // claim, in ticks
	limit    int    // claim
	hold     int64  // claim, in ticks
}

type clinOutput struct {
	conflict bool           // write
	cursors  []store.Cursor // claim
}

// clinTick is one tick of the claimers' clock.
const clinTick = time.Second

func clinIndex(id string) int {
	return slices.Index(clinLobbies[:], id)
}

var consumerModel = porcupine.Model{
	Init: func() any { return clinState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(clinState), input.(clinInput), output.(clinOutput)
		switch in.op {
		case "write":
			l := &st[in.lobby]
			if in.expected != l.head {
				return out.conflict, st
			}
			if out.conflict {
				return false, st
			}
			l.head++
			return true, st
		case "commit":
			l := &st[in.lobby]
			l.cursor = max(l.cursor, in.after)
			l.until = 0
			return true, st
		case "claim1":
			if in.lobby < 0 || len(out.cursors) != 1 {
				return false, st
			}
			l := &st[in.lobby]
			if l.head <= l.cursor || l.until > in.now || out.cursors[0].After != l.cursor {
				return false, st
			}
			l.until = in.now + in.hold
			return true, st
		}
		available := 0
		for _, l := range st {
			if l.head > l.cursor && l.until <= in.now {
				available++
			}
		}
		if len(out.cursors) != min(in.limit, available) {
			return false, st
		}
		for _, c := range out.cursors {
			i := clinIndex(c.Lobby)
			if i < 0 {
				return false, st
			}
			l := &st[i]
			if l.head <= l.cursor || l.until > in.now || c.After != l.cursor {
				return false, st // not available, or returned twice, or a wrong cursor
			}
			l.until = in.now + in.hold
		}
		return true, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(clinInput), output.(clinOutput)
		switch in.op {
		case "write":
			res := "ok"
			if out.conflict {
				res = "conflict"
			}
			return fmt.Sprintf("Write(%s, expect %d) -> %s", clinLobbies[in.lobby], in.expected, res)
		case "commit":
			return fmt.Sprintf("CommitLog(%s, %d)", clinLobbies[in.lobby], in.after)
		}
		var parts []string
		for _, c := range out.cursors {
			parts = append(parts, fmt.Sprintf("%s after %d", c.Lobby, c.After))
		}
		return fmt.Sprintf("ClaimLog(now %d, limit %d, hold %d) -> [%s]", in.now, in.limit, in.hold, strings.Join(parts, ", "))
	},
	DescribeState: func(state any) string {
		var parts []string
		for i, l := range state.(clinState) {
			parts = append(parts, fmt.Sprintf("%s: head %d cursor %d until %d", clinLobbies[i], l.head, l.cursor, l.until))
		}
		return strings.Join(parts, "; ")
	},
}

// checkConsumersLinearizable: a writer and claimers sharing a consumer
// name, whose holds run out as their clock moves on (some claims are
// committed, some left to expire), form a history that the contract's
// consumer explains.
func checkConsumersLinearizable(h *harness, partitioned bool) {
	const name = "clin"
	const writerOps, claimers, claimerOps = 90, 3, 40
	h.register(name)
	seed := Seed(h.t)
	start := time.Now()
	var (
		clock   atomic.Int64 // the claimers' shared clock, in ticks
		mu      sync.Mutex
		history []porcupine.Operation
		errs    = make([]error, claimers+1)
		wg      sync.WaitGroup
	)
	record := func(client int, in clinInput, call int64, out clinOutput) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: time.Since(start).Nanoseconds()})
	}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 0))
		for range writerOps {
			i := rng.IntN(len(clinLobbies))
			id := clinLobbies[i]
			r, err := h.s.Load(h.ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				errs[0] = fmt.Errorf("Load(%q) = %w", id, err)
				return
			}
			in := clinInput{op: "write", lobby: i, expected: r.Version}
			call := time.Since(start).Nanoseconds()
			err = h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: []byte("x"), At: t0, Effects: []byte("e")})
			switch {
			case err == nil:
				record(0, in, call, clinOutput{})
			case errors.Is(err, store.ErrConflict):
				record(0, in, call, clinOutput{conflict: true})
			default:
				errs[0] = fmt.Errorf("Write(%q, %d) = %w", id, r.Version, err)
				return
			}
		}
	})
	for c := 1; c <= claimers; c++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for range claimerOps {
				in := clinInput{op: "claim", now: clock.Add(1), limit: 1 + rng.IntN(2), hold: int64(2 + rng.IntN(4))}
				call := time.Since(start).Nanoseconds()
				got, err := h.s.ClaimLog(h.ctx, name, t0.Add(time.Duration(in.now)*clinTick), in.limit, time.Duration(in.hold)*clinTick)
				if err != nil {
					errs[c] = fmt.Errorf("ClaimLog = %w", err)
					return
				}
				if partitioned {
					// Each partition is claimed at its own instant: one
					// operation per lobby returned, all in the call's
					// interval (their own clients, as they overlap).
					for k, cur := range got {
						one := in
						one.op, one.lobby = "claim1", clinIndex(cur.Lobby)
						record(1000*c+k, one, call, clinOutput{cursors: []store.Cursor{cur}})
					}
				} else {
					record(c, in, call, clinOutput{cursors: slices.Clone(got)})
				}
				for _, cur := range got {
					if rng.IntN(4) == 0 {
						continue // let the hold run out
					}
					after := cur.After + uint64(rng.IntN(3)) // read some; maybe more than exists
					in := clinInput{op: "commit", lobby: clinIndex(cur.Lobby), after: after}
					if in.lobby < 0 {
						errs[c] = fmt.Errorf("ClaimLog returned lobby %q, which nobody wrote", cur.Lobby)
						return
					}
					call := time.Since(start).Nanoseconds()
					if err := h.s.CommitLog(h.ctx, name, cur.Lobby, after); err != nil {
						errs[c] = fmt.Errorf("CommitLog(%q, %d) = %w", cur.Lobby, after, err)
						return
					}
					record(c, in, call, clinOutput{})
				}
			}
		})
	}
	h.wait(&wg, "the writer and the claimers")
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	res, _ := porcupine.CheckOperationsVerbose(consumerModel, history, 60*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		h.t.Fatalf("the history of %d concurrent Writes, ClaimLogs and CommitLogs under one consumer name is not linearizable: "+
			"some claim cannot come from any order of atomic operations (two claims overlapping, a stale cursor, a lost write)", len(history))
	default:
		h.t.Fatalf("porcupine could not decide within 60s whether the history of %d operations is linearizable (%v)", len(history), res)
	}
}
