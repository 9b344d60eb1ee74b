package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lobbyhost/lobbyhost/store"
)

// The linearizability check records a history of concurrent Loads, log
// reads and conditional Writes (each appending an entry that repeats its
// data) and asks porcupine whether some order of them, each taking effect
// between its call and its return, explains every result with a plain
// versioned register per lobby whose log holds one entry per version. A store that is atomic only
// most of the time (a version published before its data, a read served from
// a lagging copy, a check and a set in two steps) produces a history no
// such order explains.

type linInput struct {
	id       string
	write    bool
	log      bool   // a ReadLog of the whole log instead of a Load
	expected uint64 // write only
	data     string // write only
}

type linOutput struct {
	version  uint64 // load: the version; log: the newest position
	data     string // load: the data; log: the newest entry's data
	missing  bool   // load: ErrNotFound
	conflict bool   // write: ErrConflict
	broken   bool   // log: not one entry per position from 1
}

type linState struct {
	version uint64
	data    string
}

var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byID := map[string][]porcupine.Operation{}
		var ids []string
		for _, op := range history {
			id := op.Input.(linInput).id
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
			}
			byID[id] = append(byID[id], op)
		}
		var out [][]porcupine.Operation
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(linState), input.(linInput), output.(linOutput)
		if in.log {
			return !out.broken && out.version == st.version && out.data == st.data, st
		}
		if !in.write {
			if st.version == 0 {
				return out.missing && out.version == 0, st
			}
			return !out.missing && out.version == st.version && out.data == st.data, st
		}
		if in.expected == st.version {
			return !out.conflict, linState{version: st.version + 1, data: in.data}
		}
		return out.conflict, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		if in.log {
			if out.broken {
				return fmt.Sprintf("ReadLog(%s) -> not one entry per position", in.id)
			}
			return fmt.Sprintf("ReadLog(%s) -> up to %d, last %q", in.id, out.version, out.data)
		}
		if !in.write {
			if out.missing {
				return fmt.Sprintf("Load(%s) -> not found", in.id)
			}
			return fmt.Sprintf("Load(%s) -> v%d %q", in.id, out.version, out.data)
		}
		res := "ok"
		if out.conflict {
			res = "conflict"
		}
		return fmt.Sprintf("Write(%s, expect v%d, %q) -> %s", in.id, in.expected, in.data, res)
	},
	DescribeState: func(state any) string {
		st := state.(linState)
		return fmt.Sprintf("v%d %q", st.version, st.data)
	},
}

// visualizeEnv names a directory where a failing linearizability check
// writes porcupine's HTML rendering of the history.
const visualizeEnv = "LOBBYHOST_STORETEST_VISUALIZE"

// checkLinearizable: concurrent Loads, ReadLogs and Writes on a few
// lobbies form a linearizable history of versioned registers with a log.
func checkLinearizable(h *harness) {
	const clients, opsPerClient = 4, 120
	ids := []string{"lin-a", "lin-b"}
	seed := Seed(h.t)
	start := time.Now()
	histories := make([][]porcupine.Operation, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			seen := map[string]uint64{} // last version this client loaded
			for i := range opsPerClient {
				id := ids[rng.IntN(len(ids))]
				in := linInput{id: id}
				if rng.IntN(4) == 0 {
					in.log = true
				} else if v, ok := seen[id]; ok && rng.IntN(3) > 0 {
					in.write = true
					in.expected = v
					if rng.IntN(8) == 0 {
						in.expected = v + 1 // sometimes ahead of what was seen
					}
					in.data = fmt.Sprintf("c%d-%d", c, i)
				}
				call := time.Since(start).Nanoseconds()
				var out linOutput
				switch {
				case in.log:
					entries, err := h.s.ReadLog(h.ctx, id, 0, 10000)
					if err != nil {
						errs[c] = fmt.Errorf("ReadLog(%q, 0, 10000) = %w", id, err)
						return
					}
					for i, e := range entries {
						out.broken = out.broken || e.Version != uint64(i+1)
					}
					if n := len(entries); n > 0 {
						out.version, out.data = entries[n-1].Version, string(entries[n-1].Data)
					}
				case in.write:
					err := h.s.Write(h.ctx, store.Write{ID: id, Expected: in.expected, Data: []byte(in.data), At: t0, Effects: []byte(in.data)})
					switch {
					case err == nil:
					case errors.Is(err, store.ErrConflict):
						out.conflict = true
					default:
						errs[c] = fmt.Errorf("Write(%q, %d) = %w", id, in.expected, err)
						return
					}
					delete(seen, id)
				default:
					r, err := h.s.Load(h.ctx, id)
					switch {
					case err == nil:
					case errors.Is(err, store.ErrNotFound):
						out.missing = true
					default:
						errs[c] = fmt.Errorf("Load(%q) = %w", id, err)
						return
					}
					out.version, out.data = r.Version, string(r.Data)
					seen[id] = r.Version
				}
				ret := time.Since(start).Nanoseconds()
				histories[c] = append(histories[c], porcupine.Operation{
					ClientId: c, Input: in, Call: call, Output: out, Return: ret,
				})
			}
		})
	}
	h.wait(&wg, "the clients")
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	var history []porcupine.Operation
	for _, hc := range histories {
		history = append(history, hc...)
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, 60*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		msg := fmt.Sprintf("the history of %d concurrent Loads and Writes is not linearizable: "+
			"some result cannot come from any order of atomic operations", len(history))
		if dir := os.Getenv(visualizeEnv); dir == "" {
			msg += fmt.Sprintf(" (set %s to a directory to get an HTML visualization of the history)", visualizeEnv)
		} else {
			path := filepath.Join(dir, fmt.Sprintf("linearizability-%d.html", time.Now().UnixNano()))
			if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
				msg += fmt.Sprintf(" (writing the visualization: %v)", err)
			} else {
				msg += "; visualization: " + path
			}
		}
		h.t.Fatal(msg)
	default:
		h.t.Fatalf("porcupine could not decide within 60s whether the history of %d operations is linearizable (%v)", len(history), res)
	}
}
