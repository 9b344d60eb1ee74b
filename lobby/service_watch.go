package lobby

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/store"
)

// Change is one step of a watched lobby, in the order the lobby's commits
// were made, whichever process made them.
type Change struct {
	Lobby string
	// Version is the store version of the commit (the position of its
	// entry in the lobby's effects log), or of the snapshot. It is not
	// the revision clients see: a commit that ends a connection or
	// renews a heartbeat moves the version and not the revision.
	Version uint64
	// Revision is the lobby's revision after the change, as clients
	// count them: the last event's, or the snapshot's; for a commit that
	// only ended connections, the revision it left unchanged.
	Revision uint64
	// Events are the visible changes the commit made, in revision order.
	Events []Event
	// Ended are the connection generations the commit ended: a process
	// holding one of their sockets closes it (Cause says why).
	Ended []Ended
	// Snapshot is set instead of Events and Ended when the watch starts
	// behind the lobby or loses its place (the log was compacted past it,
	// or the watcher fell more than its buffer behind): it is the whole
	// current view, and the updates after it continue from its Version.
	// Connections ended in the skipped stretch are not listed; a transport
	// learns of them from their next heartbeat, reported stale.
	Snapshot *Snapshot
}

// DefaultWatchBuffer is how many updates a Watcher holds for a reader that
// does not keep up before it gives up on them and offers a snapshot instead.
const DefaultWatchBuffer = 1024

// ErrWatchClosed is returned by Watcher.Next after Close, or once the
// context given to Watch is done.
var ErrWatchClosed = errors.New("lobby: watcher closed")

// ErrNotRunning is returned by Watcher.Next when it has nothing to return
// and the Service's Run is not running: without Run, no commit of another
// process can reach the Watcher, so Next says so rather than wait for one.
// The Watcher stays good: once Run runs, it catches up on what it missed
// (Run looks at the log heads of every watched lobby when it starts), and
// the next call to Next continues in order.
var ErrNotRunning = errors.New("lobby: service not running (call Run): other processes' commits cannot reach the watcher")

// Watcher follows one lobby for its reader: see Service.Watch. Its methods
// are safe for concurrent use, but updates are meant for one reader.
type Watcher struct {
	hub   *watchHub
	lw    *lobbyWatch
	ready chan struct{}
	stop  func() bool // ends the context's hold on the Watcher

	mu       sync.Mutex // guards the fields below
	queue    []Change
	resync   bool   // the reader must be given a snapshot next
	skip     uint64 // drop queued updates at or below this version
	rev      uint64 // the highest revision handed to the reader
	closed   bool
	unheard  bool // Next last returned ErrNotRunning: wake it when Run starts
	attached bool // registered with lw (see register)
}

// Watch follows lobby id for this process: each commit to the lobby, by
// this Service or by any process sharing its store, reaches the Watcher as
// one Change, in version order, without gaps or repeats. Commits of this
// Service arrive at once, without a store read; commits of other processes
// arrive through the store's change notifications (store.Notifier), or by
// polling the log heads without them, which Run does: a Watcher needs Run
// running to see other processes' commits, and Next returns ErrNotRunning
// instead of waiting while it is not.
//
// afterRevision is the revision the caller already shows (0 for a new
// reader). If the lobby is at that revision, the first Change is the next
// commit; otherwise the first Change is a Snapshot of the lobby now. Like
// Snapshot, Watch commits overdue deadlines first.
//
// ctx bounds the Watcher, not only the call: when ctx is done the Watcher
// is closed (Next returns ErrWatchClosed), as if Close had been called, so
// pass a context that lives as long as the reader does, not a per-call
// timeout. Close the Watcher when done with it before that; it holds
// memory in this Service until one or the other. To follow a lobby on
// behalf of sockets, Rooms does all of this.
func (s *Service) Watch(ctx context.Context, id string, afterRevision uint64) (*Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := s.newWatcher(id)
	_, err := s.transact(ctx, id, txn{cmd: rules.Tick(), view: func(st *rules.State, v uint64) {
		w.register(st, v, st.Revision != afterRevision)
	}})
	if err != nil {
		w.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, w.Close)
	w.mu.Lock()
	w.stop = stop
	w.mu.Unlock()
	return w, nil
}

// newWatcher attaches a Watcher of lobby id that follows nothing until it
// is registered: commits of this Service made from now on find it.
func (s *Service) newWatcher(id string) *Watcher {
	return &Watcher{hub: s.hub, lw: s.hub.attach(id), ready: make(chan struct{}, 1)}
}

// register starts w at version v, at which the lobby is st; it must be
// called under the lobby's lock (a transaction's view), so that no commit
// of this Service comes between. If first, the reader's first Change is a
// Snapshot of st. A Watcher that starts behind the other Watchers of its
// lobby gives its reader a fresh snapshot first instead. Registering again
// does nothing.
func (w *Watcher) register(st *rules.State, v uint64, first bool) {
	w.mu.Lock()
	if w.attached || w.closed {
		w.mu.Unlock()
		return
	}
	w.attached = true
	w.skip, w.rev = v, st.Revision
	if first {
		snap := snapshotOf(st)
		w.queue = append(w.queue, Change{Lobby: st.ID, Version: v, Revision: snap.Revision, Snapshot: &snap})
	}
	w.mu.Unlock()

	lw := w.lw
	lw.mu.Lock()
	if !lw.started {
		lw.started, lw.cursor = true, v
	}
	// A read of the log may already have handed out entries past v to
	// the other Watchers (reads do not take the lobby's lock); this one
	// then starts from a fresh snapshot.
	behind := lw.cursor > v
	lw.watchers[w] = struct{}{}
	lw.mu.Unlock()

	w.mu.Lock()
	closed := w.closed
	if behind && !closed {
		w.queue, w.resync = nil, true
	}
	w.mu.Unlock()
	if closed {
		// Closed meanwhile: its detach may have missed this entry.
		lw.mu.Lock()
		delete(lw.watchers, w)
		lw.mu.Unlock()
	}
	// The reader may have something already: a snapshot, or a commit a
	// notification announced before the registration (see remote).
	poke(w.ready)
}

// Next returns the next Change, waiting for one no longer than ctx allows.
// After Close it returns ErrWatchClosed; while Run is not running, it
// returns ErrNotRunning instead of waiting.
func (w *Watcher) Next(ctx context.Context) (Change, error) {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return Change{}, ErrWatchClosed
		}
		if w.resync {
			w.resync, w.queue = false, nil
			w.mu.Unlock()
			return w.snapshot(ctx)
		}
		for len(w.queue) > 0 {
			u := w.queue[0]
			w.queue[0] = Change{}
			w.queue = w.queue[1:]
			if u.Snapshot == nil && u.Version <= w.skip {
				continue
			}
			if u.Version > w.skip {
				w.skip = u.Version
			}
			if n := len(u.Events); n > 0 {
				u.Revision = u.Events[n-1].Revision
			} else if u.Snapshot != nil {
				u.Revision = u.Snapshot.Revision
			} else {
				u.Revision = w.rev
			}
			w.rev = max(w.rev, u.Revision)
			w.mu.Unlock()
			return u, nil
		}
		w.mu.Unlock()
		if w.lw.stale() {
			if err := w.hub.read(ctx, w.lw); err != nil {
				return Change{}, err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return Change{}, err
		}
		w.mu.Lock()
		w.unheard = !w.hub.s.running.Load()
		unheard := w.unheard
		w.mu.Unlock()
		if unheard {
			return Change{}, ErrNotRunning
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			return Change{}, ctx.Err()
		}
	}
}

// Ready returns a channel that receives a value when Next may have
// something to return without waiting (or, after ErrNotRunning, when Run
// has started); use it to wait for several Watchers (or other events) in
// one select, then call Next.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Close stops the Watcher and releases what it holds. It is idempotent.
func (w *Watcher) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed, w.queue = true, nil
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.hub.detach(w.lw, w)
	poke(w.ready)
}

// snapshot gives the reader the lobby as it is now and drops queued
// updates the snapshot already covers.
func (w *Watcher) snapshot(ctx context.Context) (Change, error) {
	var snap Snapshot
	var version uint64
	_, err := w.hub.s.transact(ctx, w.lw.id, txn{cmd: rules.Tick(), view: func(st *rules.State, v uint64) {
		snap, version = snapshotOf(st), v
	}})
	if err != nil {
		w.mu.Lock()
		w.resync = true // try again on the next call
		w.mu.Unlock()
		return Change{}, err
	}
	w.mu.Lock()
	if version > w.skip {
		w.skip = version
	}
	w.rev = max(w.rev, snap.Revision)
	w.mu.Unlock()
	return Change{Lobby: w.lw.id, Version: version, Revision: snap.Revision, Snapshot: &snap}, nil
}

// push queues u for the reader, or, past the buffer, drops the queue and
// asks for a snapshot.
func (w *Watcher) push(u Change, limit int) {
	w.mu.Lock()
	switch {
	case w.closed, w.resync:
	case len(w.queue) >= limit:
		w.queue, w.resync = nil, true
	default:
		w.queue = append(w.queue, u)
	}
	w.mu.Unlock()
	poke(w.ready)
}

func (w *Watcher) lostPlace() {
	w.mu.Lock()
	if !w.closed {
		w.queue, w.resync = nil, true
	}
	w.mu.Unlock()
	poke(w.ready)
}

// watchHub is a Service's record of the lobbies its Watchers follow. A
// lobby nobody in this process watches costs nothing here: commits only
// look it up.
type watchHub struct {
	s      *Service
	buffer int

	mu      sync.RWMutex
	lobbies map[string]*lobbyWatch
}

// lobbyWatch is one watched lobby: the position up to which every entry of
// its log has been handed to its Watchers, and those Watchers.
type lobbyWatch struct {
	id   string
	refs int // Watchers attached or attaching; guarded by watchHub.mu

	readMu sync.Mutex // one log read at a time

	mu      sync.Mutex // guards the fields below
	started bool       // cursor is set
	cursor  uint64     // every entry at or below it was handed out
	known   uint64     // the highest version known to be committed
	pending []Change   // this Service's commits above a gap, in order
	// writing is the version this Service's write in flight would make
	// (0: none); noted is a notification of that version that came
	// while it was in flight. See writing and wrote.
	writing  uint64
	noted    uint64
	watchers map[*Watcher]struct{}
}

func newWatchHub(s *Service, buffer int) *watchHub {
	return &watchHub{s: s, buffer: buffer, lobbies: make(map[string]*lobbyWatch)}
}

func (h *watchHub) attach(id string) *lobbyWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	lw := h.lobbies[id]
	if lw == nil {
		lw = &lobbyWatch{id: id, watchers: make(map[*Watcher]struct{})}
		h.lobbies[id] = lw
	}
	lw.refs++
	return lw
}

func (h *watchHub) detach(lw *lobbyWatch, w *Watcher) {
	lw.mu.Lock()
	delete(lw.watchers, w)
	lw.mu.Unlock()
	h.mu.Lock()
	lw.refs--
	if lw.refs == 0 {
		delete(h.lobbies, lw.id)
	}
	h.mu.Unlock()
}

func (h *watchHub) lookup(id string) *lobbyWatch {
	h.mu.RLock()
	lw := h.lobbies[id]
	h.mu.RUnlock()
	return lw
}

// writing is called, under the lobby's lock, before this Service writes
// version of lobby id. The store's notification of a commit can arrive
// before the write returns; a notification of exactly this version is then
// held back until the write's outcome is known (wrote), rather than waking
// the Watchers for a log read that local would have made needless. It
// returns the lobby's watch, or nil if nobody in this process watches it.
func (h *watchHub) writing(id string, version uint64) *lobbyWatch {
	lw := h.lookup(id)
	if lw == nil {
		return nil
	}
	lw.mu.Lock()
	lw.writing, lw.noted = version, 0
	lw.mu.Unlock()
	return lw
}

// wrote ends the write announced by writing (lw may be nil). If it
// committed, fx holds its effects and local hands them out. If it failed,
// a notification of its version that came meanwhile was another process's
// commit, and the Watchers read the log for it.
func (h *watchHub) wrote(lw *lobbyWatch, committed bool, version uint64, fx *rules.Effects) {
	if lw == nil {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	noted := lw.noted
	lw.writing, lw.noted = 0, 0
	if committed {
		h.local(lw, version, fx)
		return
	}
	if noted > lw.cursor && noted > lw.known {
		lw.known = noted
		lw.wakeAll()
	}
}

// local hands out a commit of this Service, made at version (the record
// went from version-1 to version), under the lobby's lock, so that the
// commits of this Service reach it in version order. If every entry up to
// version-1 has been handed out, the commit goes out at once; otherwise
// entries of other processes may come between, and it waits for a read.
// lw.mu is held.
func (h *watchHub) local(lw *lobbyWatch, version uint64, fx *rules.Effects) {
	if !lw.started || version <= lw.cursor {
		return
	}
	lw.known = max(lw.known, version)
	u := Change{Lobby: lw.id, Version: version, Events: fx.Events, Ended: fx.Ended}
	if len(lw.pending) == 0 && version == lw.cursor+1 {
		lw.cursor = version
		if !fx.Empty() {
			lw.deliver(u, h.buffer)
		}
		return
	}
	// The log holds every pending commit too, so the list only saves a
	// read: keep it bounded for a reader that stopped calling Next.
	if len(lw.pending) >= h.buffer {
		lw.pending = append(lw.pending[:0], lw.pending[1:]...)
	}
	lw.pending = append(lw.pending, u)
	lw.wakeAll()
}

// remote notes that another process committed version (a change
// notification); the Watchers' next Next reads the log.
func (h *watchHub) remote(id string, version uint64) {
	lw := h.lookup(id)
	if lw == nil {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if version <= lw.cursor || version <= lw.known {
		return
	}
	if version == lw.writing {
		lw.noted = version // probably this Service's own: see writing
		return
	}
	// Kept even before the first Watcher registers: a notification that
	// comes between the registering transaction's read and its
	// registration names a commit the new Watcher must not wait for.
	lw.known = version
	lw.wakeAll()
}

// watched returns the IDs of the lobbies followed now.
func (h *watchHub) watched() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	ids := make([]string, 0, len(h.lobbies))
	for id := range h.lobbies {
		ids = append(ids, id)
	}
	return ids
}

// lost is called when change notifications may have been missed: one look
// at the heads of every watched lobby finds those that moved.
func (h *watchHub) lost(ctx context.Context) error {
	h.wakeUnheard()
	ids := h.watched()
	if len(ids) == 0 {
		return nil
	}
	heads, err := h.s.st.LogHeads(ctx, ids)
	if err != nil {
		return fmt.Errorf("lobby: log heads: %w", err)
	}
	for i, id := range ids {
		if i < len(heads) {
			h.remote(id, heads[i])
		}
	}
	return nil
}

// wakeUnheard wakes the readers that were told ErrNotRunning: Run, which
// calls lost when it starts, is running now.
func (h *watchHub) wakeUnheard() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, lw := range h.lobbies {
		lw.mu.Lock()
		for w := range lw.watchers {
			w.mu.Lock()
			if w.unheard {
				w.unheard = false
				poke(w.ready)
			}
			w.mu.Unlock()
		}
		lw.mu.Unlock()
	}
}

// stale reports whether the log holds entries not yet handed out (known
// from a notification, or from a commit of this Service above a gap).
func (lw *lobbyWatch) stale() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.started && (lw.known > lw.cursor || len(lw.pending) > 0)
}

func (lw *lobbyWatch) wakeAll() {
	for w := range lw.watchers {
		poke(w.ready)
	}
}

// deliver hands u to every Watcher; lw.mu is held.
func (lw *lobbyWatch) deliver(u Change, limit int) {
	for w := range lw.watchers {
		w.push(u, limit)
	}
}

// read brings lw up to date from the store's log: every entry after the
// cursor, in order, then this Service's commits that waited for them. A
// read that reaches the end of the log also covers every version known to
// be committed before it started, so the cursor moves past commits that
// left no entry (heartbeats).
func (h *watchHub) read(ctx context.Context, lw *lobbyWatch) error {
	lw.readMu.Lock()
	defer lw.readMu.Unlock()
	lw.mu.Lock()
	after, known := lw.cursor, lw.known
	for _, p := range lw.pending {
		known = max(known, p.Version)
	}
	lw.mu.Unlock()
	const batch = 256
	for {
		entries, err := h.s.st.ReadLog(ctx, lw.id, after, batch)
		var ce *store.CompactedError
		if errors.As(err, &ce) {
			h.compacted(lw, ce.Trimmed)
			after = max(after, ce.Trimmed)
			continue
		}
		if err != nil {
			return fmt.Errorf("lobby %q: read log: %w", lw.id, err)
		}
		lw.mu.Lock()
		for _, e := range entries {
			if e.Version <= lw.cursor {
				continue
			}
			fx, err := rules.DecodeEffects(e.Data)
			if err != nil {
				// An entry that does not decode cannot be handed
				// out; the readers get the lobby as it is instead.
				h.s.log.Error("lobby effects entry undecodable", "lobby", lw.id, "version", e.Version, "err", err)
				for w := range lw.watchers {
					w.lostPlace()
				}
			} else if !fx.Empty() {
				lw.deliver(Change{Lobby: lw.id, Version: e.Version, Events: fx.Events, Ended: fx.Ended}, h.buffer)
			}
			lw.cursor = e.Version
		}
		if len(entries) == batch {
			after = lw.cursor
			lw.mu.Unlock()
			continue
		}
		// The end of the log: everything committed before the read
		// started is handed out.
		lw.cursor = max(lw.cursor, known)
		lw.flushPending(h.buffer)
		lw.mu.Unlock()
		return nil
	}
}

// flushPending hands out the waiting commits of this Service that follow
// the cursor; lw.mu is held.
func (lw *lobbyWatch) flushPending(limit int) {
	i := 0
	for ; i < len(lw.pending); i++ {
		u := lw.pending[i]
		if u.Version <= lw.cursor {
			continue
		}
		if u.Version != lw.cursor+1 {
			break // still a gap: the next read fills it
		}
		lw.cursor = u.Version
		if len(u.Events) > 0 || len(u.Ended) > 0 {
			lw.deliver(u, limit)
		}
	}
	lw.pending = append(lw.pending[:0], lw.pending[i:]...)
}

// compacted: the log no longer holds entries up to trimmed, so every
// Watcher starts again from a snapshot.
func (h *watchHub) compacted(lw *lobbyWatch, trimmed uint64) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	h.s.log.Warn("lobby effects log compacted past a watcher", "lobby", lw.id, "cursor", lw.cursor, "trimmed", trimmed)
	for w := range lw.watchers {
		w.lostPlace()
	}
	lw.cursor = max(lw.cursor, trimmed)
}
