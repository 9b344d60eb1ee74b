package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lobbyhost/lobbyhost/store"
)

// modelRetention is what the ModelRetained check asks NewRetained for: an
// age bound only, so that which entries TrimLog removes is exact (count
// retention has its own check).
var modelRetention = store.Retention{Age: time.Hour}

// model is the reference store: what a correct store shows after a
// sequence of calls, kept in plain maps and slices.
type model struct {
	records map[string]store.Record // lobbies with a record
	floors  map[string]uint64       // version or floor of every ID with a record or a tombstone
	tombs   map[string][]byte       // the data of each deleted record whose entries remain
	logs    map[string]*modelLog    // every ID with a record or a tombstone
	global  uint64                  // what every other ID reports as its floor
	now     time.Time               // the writers' clock: each write's At

	consumers map[string]*modelConsumer // registered names
	claimNow  time.Time                 // the consumers' clock: each ClaimLog's now
}

// modelConsumer is a durable consumer: a cursor for each lobby that had an
// entry since it registered, and its claims.
type modelConsumer struct {
	cursors map[string]uint64
	claims  map[string]time.Time // claimed until
}

// available is what ClaimLog(name, now) may return: the lobbies with
// entries after the cursor that name does not hold at now.
func (m *model) available(name string, now time.Time) map[string]uint64 {
	out := map[string]uint64{}
	c := m.consumers[name]
	if c == nil {
		return out
	}
	for id, cur := range c.cursors {
		if m.head(id) > cur && !now.Before(c.claims[id]) {
			out[id] = cur
		}
	}
	return out
}

type modelLog struct {
	entries []store.Entry
	// trimmed is the highest position retention removed from the log.
	trimmed uint64
	// born is the store-wide floor when the lobby was created from
	// nothing (no record, no tombstone): positions up to it may have
	// been an earlier life's, trimmed since, so a read after a position
	// below it may report compaction up to born, or read what there is.
	born uint64
}

func (m *model) version(id string) uint64 {
	if f, ok := m.floors[id]; ok {
		return f
	}
	return m.global
}

func (m *model) due(now time.Time, limit int) []store.Due {
	var all []store.Due
	for id, r := range m.records {
		if !r.Deadline.IsZero() {
			all = append(all, store.Due{ID: id, Deadline: r.Deadline})
		}
	}
	sortDue(all)
	return dueAt(all, now, limit)
}

func (m *model) head(id string) uint64 {
	if l := m.logs[id]; l != nil && len(l.entries) > 0 {
		return l.entries[len(l.entries)-1].Version
	}
	return 0
}

// readLog is what ReadLog(id, after, limit) returns: entries, or the
// Trimmed of a CompactedError (0 for none); if maybe, a CompactedError
// with Trimmed maybe is right too.
func (m *model) readLog(id string, after uint64, limit int) (entries []store.Entry, trimmed, maybe uint64) {
	l := m.logs[id]
	if l == nil {
		if after < m.global {
			return nil, m.global, 0
		}
		return nil, 0, 0
	}
	if after < l.trimmed {
		return nil, l.trimmed, 0
	}
	if after < l.born {
		maybe = l.born
	}
	var out []store.Entry
	for _, e := range l.entries {
		if e.Version > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, 0, maybe
}

// folds reports the IDs without a record whose log is empty: their
// tombstones must go.
func (m *model) folds() []string {
	var out []string
	for id, l := range m.logs {
		if _, ok := m.records[id]; !ok && len(l.entries) == 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// modelIDs include a prefix pair and IDs whose byte order differs from
// their case-insensitive and Unicode order.
var modelIDs = []string{"m", "m:", "M", "é"}

// modelDeadlines repeat instants, in two zones, so ties are common.
var modelDeadlines = []time.Time{
	{}, // none
	t0.Add(-2 * time.Second),
	t0.Add(-time.Second),
	t0.Add(-time.Second).In(time.FixedZone("UTC+2", 2*3600)),
	t0,
	t0.Add(time.Second),
}

// checkModel: random sequences of calls (writes with right and wrong
// versions, with and without Effects, alone and, for a store.BatchWriter,
// in batches, deletes, loads, due queries, log
// reads and heads; without retention, consumers registering, claiming and
// committing; with retention, trims as the writers' clock moves)
// give the same results as the reference model, and after every step the
// store shows exactly the model's records, floors, due index and logs.
// Each rapid iteration uses a new store.
func checkModel(t *testing.T, newStore func(*testing.T) store.Store, retained bool) {
	ctx := checkContext(t)
	rapid.Check(t, func(rt *rapid.T) {
		s := newStore(t)
		if s == nil {
			rt.Fatal("newStore returned a nil store")
		}
		m := &model{records: map[string]store.Record{}, floors: map[string]uint64{}, tombs: map[string][]byte{},
			logs: map[string]*modelLog{}, now: t0.Truncate(time.Millisecond),
			consumers: map[string]*modelConsumer{}, claimNow: t0}
		genID := rapid.SampledFrom(modelIDs)
		genData := rapid.SliceOfN(rapid.Byte(), 0, 6)
		genDeadline := rapid.SampledFrom(modelDeadlines)
		// A wrong version: near the right one, or zero.
		genWrong := func(rt *rapid.T, right uint64) uint64 {
			for {
				v := rapid.Uint64Range(0, right+2).Draw(rt, "wrong")
				if v != right {
					return v
				}
			}
		}
		// learnFloor adopts the floor the store reports for id after
		// it lost its record or tombstone, which must be at least
		// least and is then every such ID's floor.
		learnFloor := func(rt *rapid.T, id string, least uint64) {
			r, err := s.Load(ctx, id)
			if !errors.Is(err, store.ErrNotFound) {
				rt.Fatalf("Load(%q) after its tombstone folded = %s, want %v", id, describe(err), store.ErrNotFound)
			}
			if r.Version < least {
				rt.Fatalf("Load(%q) after its tombstone folded: floor %d, want >= %d (every floor folded so far)", id, r.Version, least)
			}
			m.global = r.Version
		}

		actions := map[string]func(*rapid.T){
			"Write": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				right := m.version(id)
				expected := right
				if !rapid.Bool().Draw(rt, "right version") {
					expected = genWrong(rt, right)
				}
				var effects []byte
				switch rapid.IntRange(0, 3).Draw(rt, "effects") {
				case 0: // none
				case 1:
					effects = []byte{}
				default:
					effects = genData.Draw(rt, "effects data")
				}
				w := store.Write{ID: id, Expected: expected, Data: genData.Draw(rt, "data"), Deadline: genDeadline.Draw(rt, "deadline"),
					At: m.now, Effects: effects}
				m.now = m.now.Add(time.Millisecond)
				err := s.Write(ctx, w)
				if expected != right {
					if !errors.Is(err, store.ErrConflict) {
						rt.Fatalf("Write(%q, expected %d) at version %d = %s, want %v", id, expected, right, describe(err), store.ErrConflict)
					}
					return
				}
				if err != nil {
					rt.Fatalf("Write(%q, expected %d) = %v, want nil", id, expected, err)
				}
				m.commit(w)
			},
			"Delete": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				right := m.version(id)
				expected := right
				if !rapid.Bool().Draw(rt, "right version") {
					expected = genWrong(rt, right)
				}
				floor := rapid.Uint64Range(0, right+3).Draw(rt, "floor")
				err := s.Delete(ctx, store.Deletion{ID: id, Expected: expected, Floor: floor})
				_, exists := m.records[id]
				switch {
				case !exists:
					if !errors.Is(err, store.ErrNotFound) {
						rt.Fatalf("Delete(%q) of a missing lobby = %s, want %v", id, describe(err), store.ErrNotFound)
					}
				case expected != right:
					if !errors.Is(err, store.ErrConflict) {
						rt.Fatalf("Delete(%q, %d) at version %d = %s, want %v", id, expected, right, describe(err), store.ErrConflict)
					}
				default:
					if err != nil {
						rt.Fatalf("Delete(%q, %d, %d) = %v, want nil", id, expected, floor, err)
					}
					data := m.records[id].Data
					delete(m.records, id)
					if len(m.logs[id].entries) == 0 {
						// No entries: no tombstone.
						delete(m.floors, id)
						delete(m.logs, id)
						learnFloor(rt, id, max(m.global, expected, floor))
						return
					}
					// The contract promises at least max(expected, floor);
					// adopt what the store reports if it is higher.
					r, err := s.Load(ctx, id)
					if !errors.Is(err, store.ErrNotFound) {
						rt.Fatalf("Load(%q) after Delete = %s, want %v", id, describe(err), store.ErrNotFound)
					}
					if r.Version < max(expected, floor) {
						rt.Fatalf("Load(%q) after Delete(%d, %d): floor %d, want >= %d", id, expected, floor, r.Version, max(expected, floor))
					}
					m.tombs[id] = data
					m.floors[id] = r.Version
				}
			},
			"Load": func(rt *rapid.T) {
				modelLoad(ctx, rt, s, m, genID.Draw(rt, "id"))
			},
			"Due": func(rt *rapid.T) {
				now := genDeadline.Filter(func(t time.Time) bool { return !t.IsZero() }).Draw(rt, "now")
				limit := rapid.IntRange(1, len(modelIDs)+1).Draw(rt, "limit")
				got, err := s.Due(ctx, now, limit)
				if err != nil {
					rt.Fatalf("Due(%v, %d) = %v", now, limit, err)
				}
				if d := diff(m.due(now, limit), got); d != "" {
					rt.Fatalf("Due(%v, %d) mismatch (-want +got):\n%s", now, limit, d)
				}
			},
			"ReadLog": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				after := rapid.Uint64Range(0, m.version(id)+1).Draw(rt, "after")
				limit := rapid.IntRange(1, 4).Draw(rt, "limit")
				modelReadLog(ctx, rt, s, m, id, after, limit)
			},
			"LogHeads": func(rt *rapid.T) {
				ids := rapid.SliceOfN(genID, 0, 5).Draw(rt, "ids")
				modelHeads(ctx, rt, s, m, ids)
			},
			"": func(rt *rapid.T) {
				for _, id := range modelIDs {
					modelLoad(ctx, rt, s, m, id)
					modelReadLog(ctx, rt, s, m, id, 0, 1000)
				}
				modelHeads(ctx, rt, s, m, modelIDs)
				got, err := s.Due(ctx, later, 100)
				if err != nil {
					rt.Fatalf("Due(later, 100) = %v", err)
				}
				if d := diff(m.due(later, 100), got); d != "" {
					rt.Fatalf("due index differs from the model (-want +got):\n%s", d)
				}
			},
		}
		if b, ok := s.(store.BatchWriter); ok {
			// Batches of up to four writes, each with the right version
			// (counting the earlier writes of the batch) or a wrong
			// one, now and then an invalid one.
			actions["WriteBatch"] = func(rt *rapid.T) {
				n := rapid.IntRange(0, 4).Draw(rt, "writes")
				ws := make([]store.Write, n)
				want := make([]error, n)
				pending := map[string]uint64{} // versions after the batch's earlier writes
				for i := range ws {
					id := genID.Draw(rt, "id")
					right, ok := pending[id]
					if !ok {
						right = m.version(id)
					}
					expected := right
					switch rapid.IntRange(0, 5).Draw(rt, "version") {
					case 0:
						expected = genWrong(rt, right)
						want[i] = store.ErrConflict
					case 1:
						id = ""
						want[i] = store.ErrInvalid
					default:
						pending[id] = right + 1
					}
					var effects []byte
					if rapid.Bool().Draw(rt, "with effects") {
						effects = genData.Draw(rt, "effects data")
					}
					ws[i] = store.Write{ID: id, Expected: expected, Data: genData.Draw(rt, "data"), Deadline: genDeadline.Draw(rt, "deadline"),
						At: m.now, Effects: effects}
					m.now = m.now.Add(time.Millisecond)
				}
				errs := b.WriteBatch(ctx, ws)
				if len(errs) != n {
					rt.Fatalf("WriteBatch of %d writes returned %d outcomes: %v", n, len(errs), errs)
				}
				for i, w := range ws {
					if want[i] == nil {
						if errs[i] != nil {
							rt.Fatalf("WriteBatch: write %d (%q, expected %d) = %v, want nil", i, w.ID, w.Expected, errs[i])
						}
						m.commit(w)
					} else if !errors.Is(errs[i], want[i]) {
						rt.Fatalf("WriteBatch: write %d (%q, expected %d) = %s, want %v", i, w.ID, w.Expected, describe(errs[i]), want[i])
					}
				}
			}
		}
		if !retained {
			// Consumers, where nothing is trimmed (a consumer's work
			// is then exactly the entries after its cursors).
			genName := rapid.SampledFrom([]string{"c1", "c2", "c3"})
			register := func(name string) {
				if m.consumers[name] == nil {
					m.consumers[name] = &modelConsumer{cursors: map[string]uint64{}, claims: map[string]time.Time{}}
				}
			}
			actions["RegisterConsumer"] = func(rt *rapid.T) {
				name := genName.Draw(rt, "name")
				if err := s.RegisterConsumer(ctx, name); err != nil {
					rt.Fatalf("RegisterConsumer(%q) = %v", name, err)
				}
				register(name)
			}
			actions["ClaimLog"] = func(rt *rapid.T) {
				name := genName.Draw(rt, "name")
				limit := rapid.IntRange(1, 5).Draw(rt, "limit")
				hold := time.Duration(rapid.IntRange(1, 3).Draw(rt, "hold minutes")) * time.Minute
				now := m.claimNow
				m.claimNow = m.claimNow.Add(time.Duration(rapid.IntRange(0, 2).Draw(rt, "minutes on")) * time.Minute)
				got, err := s.ClaimLog(ctx, name, now, limit, hold)
				if err != nil {
					rt.Fatalf("ClaimLog(%q, %v, %d, %v) = %v", name, now, limit, hold, err)
				}
				register(name)
				avail := m.available(name, now)
				if len(got) != min(limit, len(avail)) {
					rt.Fatalf("ClaimLog(%q, %v, %d, %v) = %v; want %d of the lobbies with work and no hold: %v",
						name, now, limit, hold, got, min(limit, len(avail)), avail)
				}
				for _, c := range got {
					cur, ok := avail[c.Lobby]
					if !ok || c.After != cur {
						rt.Fatalf("ClaimLog(%q, %v, %d, %v) = %v; want cursors among %v (lobby: cursor), each once",
							name, now, limit, hold, got, avail)
					}
					delete(avail, c.Lobby)
					m.consumers[name].claims[c.Lobby] = now.Add(hold)
				}
			}
			actions["CommitLog"] = func(rt *rapid.T) {
				name := genName.Draw(rt, "name")
				c := m.consumers[name]
				if c == nil {
					if err := s.CommitLog(ctx, name, modelIDs[0], 0); !errors.Is(err, store.ErrInvalid) {
						rt.Fatalf("CommitLog(%q) of a name never registered = %s, want %v", name, describe(err), store.ErrInvalid)
					}
					return
				}
				var ids []string
				for id := range c.cursors {
					ids = append(ids, id)
				}
				if len(ids) == 0 {
					return
				}
				slices.Sort(ids)
				id := rapid.SampledFrom(ids).Draw(rt, "lobby")
				after := rapid.Uint64Range(0, m.head(id)+1).Draw(rt, "after")
				if err := s.CommitLog(ctx, name, id, after); err != nil {
					rt.Fatalf("CommitLog(%q, %q, %d) = %v", name, id, after, err)
				}
				c.cursors[id] = max(c.cursors[id], after)
				delete(c.claims, id)
			}
		}
		if retained {
			actions["Tick"] = func(rt *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.IntRange(1, 60).Draw(rt, "minutes")) * time.Minute)
			}
			actions["TrimLog"] = func(rt *rapid.T) {
				limit := rapid.IntRange(1, 4).Draw(rt, "limit")
				// Half a millisecond off every At, so no entry is
				// exactly as old as the bound.
				now := m.now.Add(500 * time.Microsecond)
				cutoff := now.Add(-modelRetention.Age)
				type old struct {
					id string
					e  store.Entry
				}
				var all []old
				for id, l := range m.logs {
					for _, e := range l.entries {
						if e.At.Before(cutoff) {
							all = append(all, old{id, e})
						}
					}
				}
				slices.SortFunc(all, func(a, b old) int { return a.e.At.Compare(b.e.At) })
				all = all[:min(len(all), limit)]
				n, err := s.TrimLog(ctx, now, limit)
				if err != nil || n != len(all) {
					rt.Fatalf("TrimLog(%v, %d) = %d, %s; want %d, nil", now, limit, n, describe(err), len(all))
				}
				for _, o := range all {
					l := m.logs[o.id]
					l.entries = slices.DeleteFunc(l.entries, func(e store.Entry) bool { return e.Version == o.e.Version })
					l.trimmed = max(l.trimmed, o.e.Version)
				}
				least := m.global
				folded := m.folds()
				for _, id := range folded {
					least = max(least, m.floors[id])
					delete(m.floors, id)
					delete(m.tombs, id)
					delete(m.logs, id)
				}
				if len(folded) > 0 {
					learnFloor(rt, folded[0], least)
				}
			}
		}
		rt.Repeat(actions)
	})
}

// commit is what a Write of w the store accepted (w.Expected was the
// lobby's version) leaves in the model.
func (m *model) commit(w store.Write) {
	id, right := w.ID, w.Expected
	m.records[id] = store.Record{ID: id, Version: right + 1, Data: bytes.Clone(w.Data), Deadline: w.Deadline}
	m.floors[id] = right + 1
	delete(m.tombs, id)
	l := m.logs[id]
	if l == nil {
		l = &modelLog{born: m.global}
		m.logs[id] = l
	}
	if w.Effects != nil {
		l.entries = append(l.entries, store.Entry{Lobby: id, Version: right + 1, At: w.At, Data: bytes.Clone(w.Effects)})
		for _, c := range m.consumers {
			if _, ok := c.cursors[id]; !ok {
				c.cursors[id] = right // just before the first entry it is due
			}
		}
	}
}

// modelLoad compares Load(id) with the model.
func modelLoad(ctx context.Context, rt *rapid.T, s store.Store, m *model, id string) {
	r, err := s.Load(ctx, id)
	want, exists := m.records[id]
	if !exists {
		if !errors.Is(err, store.ErrNotFound) {
			rt.Fatalf("Load(%q) = %+v, %s; want %v", id, r, describe(err), store.ErrNotFound)
		}
		want = store.Record{ID: id, Version: m.version(id), Data: m.tombs[id]}
	} else if err != nil {
		rt.Fatalf("Load(%q) = %v, want nil", id, err)
	}
	if d := diff(want, r); d != "" {
		rt.Fatalf("Load(%q) differs from the model (-want +got):\n%s", id, d)
	}
}

// modelReadLog compares ReadLog(id, after, limit) with the model.
func modelReadLog(ctx context.Context, rt *rapid.T, s store.Store, m *model, id string, after uint64, limit int) {
	want, trimmed, maybe := m.readLog(id, after, limit)
	got, err := s.ReadLog(ctx, id, after, limit)
	if maybe > 0 && errors.Is(err, store.ErrCompacted) {
		trimmed = maybe
	}
	if trimmed > 0 {
		var ce *store.CompactedError
		if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) {
			rt.Fatalf("ReadLog(%q, %d, %d) = %d entries, %s; want a CompactedError with Trimmed %d", id, after, limit, len(got), describe(err), trimmed)
		}
		if d := diff(store.CompactedError{Lobby: id, After: after, Trimmed: trimmed}, *ce); d != "" {
			rt.Fatalf("ReadLog(%q, %d, %d): CompactedError differs from the model (-want +got):\n%s", id, after, limit, d)
		}
		return
	}
	if err != nil {
		rt.Fatalf("ReadLog(%q, %d, %d) = %v, want nil", id, after, limit, err)
	}
	if len(got) == len(want) {
		for i := range got {
			if sameAt(want[i].At, got[i].At) {
				got[i].At = want[i].At
			}
		}
	}
	if d := diff(want, got); d != "" {
		rt.Fatalf("ReadLog(%q, %d, %d) differs from the model (-want +got):\n%s", id, after, limit, d)
	}
}

// modelHeads compares LogHeads(ids) with the model.
func modelHeads(ctx context.Context, rt *rapid.T, s store.Store, m *model, ids []string) {
	want := make([]uint64, len(ids))
	for i, id := range ids {
		want[i] = m.head(id)
	}
	got, err := s.LogHeads(ctx, ids)
	if err != nil {
		rt.Fatalf("LogHeads(%q) = %v", ids, err)
	}
	if d := diff(want, got); d != "" {
		rt.Fatalf("LogHeads(%q) differs from the model (-want +got):\n%s", ids, d)
	}
}
