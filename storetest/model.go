package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lobbyhost/lobbyhost/store"
)

// model is the reference store: what a correct store shows after a
// sequence of calls, kept in plain maps and slices.
type model struct {
	records map[string]store.Record // lobbies with a record
	floors  map[string]uint64       // version of every ID ever written: record's or floor
	tombs   map[string][]byte       // the data of each deleted record
	outbox  []store.Event           // pending, oldest first
	seq     map[string]uint64       // last event Seq written per lobby
}

func (m *model) version(id string) uint64 { return m.floors[id] }

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
// versions, deletes, loads, due queries, pending reads and acks) give the
// same results as the reference model, and after every step the store
// shows exactly the model's records, due index and outbox. Each rapid
// iteration uses a new store.
func checkModel(t *testing.T, newStore func(*testing.T) store.Store) {
	ctx := t.Context()
	rapid.Check(t, func(rt *rapid.T) {
		s := newStore(t)
		if s == nil {
			rt.Fatal("newStore returned a nil store")
		}
		m := &model{records: map[string]store.Record{}, floors: map[string]uint64{}, tombs: map[string][]byte{}, seq: map[string]uint64{}}
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

		rt.Repeat(map[string]func(*rapid.T){
			"Write": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				right := m.version(id)
				expected := right
				if !rapid.Bool().Draw(rt, "right version") {
					expected = genWrong(rt, right)
				}
				var events []store.Event
				for i := range rapid.IntRange(0, 2).Draw(rt, "events") {
					events = append(events, store.Event{Lobby: id, Seq: m.seq[id] + uint64(i) + 1, Data: genData.Draw(rt, "event data")})
				}
				w := store.Write{ID: id, Expected: expected, Data: genData.Draw(rt, "data"), Deadline: genDeadline.Draw(rt, "deadline"), Events: events}
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
				m.records[id] = store.Record{ID: id, Version: right + 1, Data: bytes.Clone(w.Data), Deadline: w.Deadline}
				m.floors[id] = right + 1
				m.seq[id] += uint64(len(events))
				for _, e := range events {
					m.outbox = append(m.outbox, store.Event{Lobby: e.Lobby, Seq: e.Seq, Data: bytes.Clone(e.Data)})
				}
			},
			"WriteInvalid": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				other := genID.Filter(func(o string) bool { return o != id }).Draw(rt, "other")
				w := store.Write{ID: id, Expected: m.version(id), Data: []byte("invalid"), Deadline: t0,
					Events: []store.Event{{Lobby: id, Seq: m.seq[id] + 1}, {Lobby: other, Seq: m.seq[other] + 1}}}
				if err := s.Write(ctx, w); !errors.Is(err, store.ErrInvalid) {
					rt.Fatalf("Write(%q) with an event of %q = %s, want %v", id, other, describe(err), store.ErrInvalid)
				}
			},
			"Delete": func(rt *rapid.T) {
				id := genID.Draw(rt, "id")
				right := m.version(id)
				expected := right
				if !rapid.Bool().Draw(rt, "right version") {
					expected = genWrong(rt, right)
				}
				floor := rapid.Uint64Range(0, right+3).Draw(rt, "floor")
				err := s.Delete(ctx, id, expected, floor)
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
					// The contract promises at least max(expected, floor);
					// adopt what the store reports if it is higher.
					r, err := s.Load(ctx, id)
					if !errors.Is(err, store.ErrNotFound) {
						rt.Fatalf("Load(%q) after Delete = %s, want %v", id, describe(err), store.ErrNotFound)
					}
					if r.Version < max(expected, floor) {
						rt.Fatalf("Load(%q) after Delete(%d, %d): floor %d, want >= %d", id, expected, floor, r.Version, max(expected, floor))
					}
					m.tombs[id] = m.records[id].Data
					delete(m.records, id)
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
			"Pending": func(rt *rapid.T) {
				limit := rapid.IntRange(1, 8).Draw(rt, "limit")
				got, err := s.Pending(ctx, limit)
				if err != nil {
					rt.Fatalf("Pending(%d) = %v", limit, err)
				}
				if d := diff(m.outbox[:min(limit, len(m.outbox))], got); d != "" {
					rt.Fatalf("Pending(%d) mismatch (-want +got):\n%s", limit, d)
				}
			},
			"Ack": func(rt *rapid.T) {
				var acks []store.Event
				keep := m.outbox[:0:0]
				for i, e := range m.outbox {
					if rapid.Bool().Draw(rt, "ack") {
						acks = append(acks, store.Event{Lobby: e.Lobby, Seq: e.Seq})
					} else {
						keep = append(keep, m.outbox[i])
					}
				}
				if rapid.Bool().Draw(rt, "ack an unknown event") {
					id := genID.Draw(rt, "unknown lobby")
					acks = append(acks, store.Event{Lobby: id, Seq: m.seq[id] + 1})
				}
				acks = rapid.Permutation(acks).Draw(rt, "ack order")
				if err := s.Ack(ctx, acks); err != nil {
					rt.Fatalf("Ack(%d events) = %v", len(acks), err)
				}
				m.outbox = keep
			},
			"": func(rt *rapid.T) {
				for _, id := range modelIDs {
					modelLoad(ctx, rt, s, m, id)
				}
				got, err := s.Due(ctx, later, 100)
				if err != nil {
					rt.Fatalf("Due(later, 100) = %v", err)
				}
				if d := diff(m.due(later, 100), got); d != "" {
					rt.Fatalf("due index differs from the model (-want +got):\n%s", d)
				}
				events, err := s.Pending(ctx, 1000)
				if err != nil {
					rt.Fatalf("Pending(1000) = %v", err)
				}
				if d := diff(m.outbox, events); d != "" {
					rt.Fatalf("outbox differs from the model (-want +got):\n%s", d)
				}
			},
		})
	})
}

// modelLoad compares Load(id) with the model.
func modelLoad(ctx context.Context, rt *rapid.T, s store.Store, m *model, id string) {
	r, err := s.Load(ctx, id)
	want, exists := m.records[id]
	if !exists {
		if !errors.Is(err, store.ErrNotFound) {
			rt.Fatalf("Load(%q) = %+v, %s; want %v", id, r, describe(err), store.ErrNotFound)
		}
		want = store.Record{ID: id, Version: m.floors[id], Data: m.tombs[id]}
	} else if err != nil {
		rt.Fatalf("Load(%q) = %v, want nil", id, err)
	}
	if d := diff(want, r); d != "" {
		rt.Fatalf("Load(%q) differs from the model (-want +got):\n%s", id, d)
	}
}
