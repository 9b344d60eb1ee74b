package lobby

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// batchWriteLimit bounds how long one group commit may take: the writes in
// it belong to many callers, so no single caller's context governs it.
// A caller whose own context ends first stops waiting (its write's outcome
// is then unknown, as with any cancelled write).
const batchWriteLimit = 30 * time.Second

// groupCommit gathers the writes that callers make while the store is busy
// and sends them together through store.BatchWriter: under load (a burst
// of expiries, the heartbeats of many sockets) a round trip carries many
// lobbies' writes instead of one. Each write is still its own
// compare-and-set, judged by the store on its own lobby's version.
//
// Up to inflight writes or batches travel at once. A write that finds room
// is sent at once, alone, through Write: batching never delays a write on
// a Service that is not busy. Writes that find every slot taken queue up;
// when a write or batch returns, its slot sends the queue (up to max
// writes) as one batch from a new goroutine, so no caller waits for more
// than the batch its own write travels in.
type groupCommit struct {
	st       store.Store
	bw       store.BatchWriter
	max      int // writes per batch
	inflight int // writes or batches travelling at once

	mu     sync.Mutex
	queue  []*queuedWrite
	moving int // writes or batches travelling now
}

// queuedWrite is one caller's write waiting in a groupCommit.
type queuedWrite struct {
	w    store.Write
	err  error
	done chan struct{}
}

var queuedPool = sync.Pool{New: func() any { return &queuedWrite{done: make(chan struct{}, 1)} }}

// newGroupCommit returns nil when st cannot batch or batch is below 2.
func newGroupCommit(st store.Store, batch, inflight int) *groupCommit {
	bw, ok := st.(store.BatchWriter)
	if !ok || batch < 2 {
		return nil
	}
	return &groupCommit{st: st, bw: bw, max: batch, inflight: max(inflight, 1)}
}

// write stores w, alone or in a batch with other callers' writes, and
// returns its outcome as store.Store.Write would.
func (g *groupCommit) write(ctx context.Context, w store.Write) error {
	g.mu.Lock()
	if g.moving < g.inflight {
		g.moving++
		g.mu.Unlock()
		err := g.st.Write(ctx, w)
		g.handOff()
		return err
	}
	q := queuedPool.Get().(*queuedWrite)
	q.w = w
	g.queue = append(g.queue, q)
	g.mu.Unlock()
	select {
	case <-q.done:
		err := q.err
		*q = queuedWrite{done: q.done}
		queuedPool.Put(q)
		return err
	case <-ctx.Done():
		// The batch still holds q (and w's buffers); let it go to the
		// garbage collector rather than back to the pool.
		return ctx.Err()
	}
}

// handOff is called by the sender of a write or batch once it is done: its
// slot sends what queued meanwhile from a new goroutine, or comes free.
func (g *groupCommit) handOff() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.moving--
		g.mu.Unlock()
		return
	}
	batch := g.take()
	g.mu.Unlock()
	go g.send(batch)
}

// take removes up to max writes from the queue; g.mu is held.
func (g *groupCommit) take() []*queuedWrite {
	n := min(len(g.queue), g.max)
	batch := make([]*queuedWrite, n)
	copy(batch, g.queue)
	rest := copy(g.queue, g.queue[n:])
	clear(g.queue[rest:])
	g.queue = g.queue[:rest]
	return batch
}

// send writes a batch, wakes its callers, and hands off.
func (g *groupCommit) send(batch []*queuedWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), batchWriteLimit)
	ws := make([]store.Write, len(batch))
	for i, q := range batch {
		ws[i] = q.w
	}
	errs := g.bw.WriteBatch(ctx, ws)
	cancel()
	for i, q := range batch {
		if i < len(errs) {
			q.err = errs[i]
		} else {
			q.err = errShortBatch
		}
		q.done <- struct{}{}
	}
	g.handOff()
}

// errShortBatch is the outcome of a write that a store's WriteBatch
// returned no result for, against its contract: unknown.
var errShortBatch = errors.New("lobby: store: WriteBatch returned fewer results than writes")
