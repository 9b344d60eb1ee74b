package lobbytest

import (
	"context"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
)

// recorder remembers the successful writes a Service made through one
// store handle: which process committed which revision, and when.
type recorder struct {
	mu     sync.Mutex
	writes []recordedWrite
	phase  func() int32 // the test's phase when a write returns; nil for 0
}

type recordedWrite struct {
	id       string
	expected uint64
	seqs     []uint64 // the events' Seqs: the revisions committed
	phase    int32
}

// wrap returns s with its successful writes recorded in r, batched ones
// included. It offers store.Claimer and store.Notifier exactly when s
// does, and when claims and notify allow it (a test hides a capability
// from the Service by passing false), and store.BatchWriter and
// store.Sessions when s does.
func (r *recorder) wrap(s store.Store, claims, notify bool) store.Store {
	base := &recording{Store: s, r: r}
	caps := store.Of(s)
	if !claims {
		caps.Claimer = nil
	}
	if !notify {
		caps.Notifier = nil
	}
	if caps.BatchWriter != nil {
		caps.BatchWriter = &recordingBatch{bw: caps.BatchWriter, r: r}
	}
	return store.ComposeWith(base, caps)
}

// recordingBatch records the writes of a batch that committed.
type recordingBatch struct {
	bw store.BatchWriter
	r  *recorder
}

func (b *recordingBatch) WriteBatch(ctx context.Context, ws []store.Write) []error {
	errs := b.bw.WriteBatch(ctx, ws)
	for i, w := range ws {
		if i < len(errs) && errs[i] == nil {
			b.r.record(w)
		}
	}
	return errs
}

type recording struct {
	store.Store
	r *recorder
}

func (s *recording) Write(ctx context.Context, w store.Write) error {
	err := s.Store.Write(ctx, w)
	if err == nil {
		s.r.record(w)
	}
	return err
}

// record remembers a write that committed.
func (r *recorder) record(w store.Write) {
	rw := recordedWrite{id: w.ID, expected: w.Expected}
	if w.Effects != nil {
		// The Service wrote them; they decode.
		fx, _ := rules.DecodeEffects(w.Effects)
		for _, e := range fx.Events {
			rw.seqs = append(rw.seqs, e.Revision)
		}
	}
	r.mu.Lock()
	if r.phase != nil {
		rw.phase = r.phase()
	}
	r.writes = append(r.writes, rw)
	r.mu.Unlock()
}

// list returns the writes recorded so far.
func (r *recorder) list() []recordedWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedWrite(nil), r.writes...)
}

// lastVersions returns, per lobby, the version its last successful write
// in phase made.
func (r *recorder) lastVersions(phase int32) map[string]uint64 {
	m := map[string]uint64{}
	for _, w := range r.list() {
		if w.phase == phase {
			m[w.id] = max(m[w.id], w.expected+1)
		}
	}
	return m
}

// firstExpected returns, per lobby, the expected version of its first
// successful write in phase.
func (r *recorder) firstExpected(phase int32) map[string]uint64 {
	m := map[string]uint64{}
	for _, w := range r.list() {
		if _, ok := m[w.id]; !ok && w.phase == phase {
			m[w.id] = w.expected
		}
	}
	return m
}

// farFuture is a now at which every deadline the suite writes is due.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// nextDeadline returns the earliest deadline in s's due index.
func nextDeadline(ctx context.Context, s store.Store) (time.Time, bool, error) {
	d, err := s.Due(ctx, farFuture, 1)
	if err != nil || len(d) == 0 {
		return time.Time{}, false, err
	}
	return d[0].Deadline, true, nil
}
