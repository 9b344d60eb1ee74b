package lobby

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// Sink is where an Attachment delivers: one socket, as the transport
// implements it. The Attachment calls its methods one call at a time and
// in order, from a goroutine of its own that runs only while it has
// something to deliver (an idle socket costs no goroutine), so a Sink needs
// no locking for them.
type Sink interface {
	// Send delivers the next thing the socket renders. It may block (a
	// socket write): only this sink waits, since every Attachment has a
	// bounded queue of its own (see SinkQueue). The first Send may come
	// before Rooms.Join has returned: a transport that renders the
	// Snapshot first implements [Starter], whose Start comes before any
	// Send, instead of holding deliveries back. ctx is done once the
	// Attachment is detached; Send should then return soon. The
	// Delivery's Event and State are shared with the lobby's other Sinks:
	// read them, do not modify them.
	Send(ctx context.Context, d Delivery)
	// End tells the sink that its connection generation ended in a
	// commit (superseded by a newer tab, kicked, timed out, left, or
	// closed by a report elsewhere): close the socket, with a close code
	// for e.Cause. It is called at most once, after every delivery queued
	// before it, and nothing is called after it. The Attachment is
	// detached by then; the transport need not report the close.
	End(e Ended)
}

// A Starter is a Sink that is told of its join before anything else:
// Rooms.Join calls Start once, on Join's own goroutine, after the join has
// committed and before the Sink's first Send, with the Attachment and the
// Snapshot Join is about to return. A transport queues there what the
// socket shows first (the lobby as of the join, say, or the change that
// admitted it: a.Result()), so that no delivery can overtake it, and needs
// no holding back of its own. Start should return soon: the lobby's
// changes for this socket wait meanwhile (they are kept, not lost). It
// must not call Rooms.Join for the same Sink.
type Starter interface {
	Sink
	Start(a *Attachment, first Snapshot)
}

// SinkFuncs is a Sink made of two functions, for a transport that needs no
// type of its own. A nil function ignores what it would be given (a nil
// OnEnd leaves ended sockets open: give one).
type SinkFuncs struct {
	OnDelivery func(ctx context.Context, d Delivery)
	OnEnd      func(e Ended)
}

// Send calls f.OnDelivery.
func (f SinkFuncs) Send(ctx context.Context, d Delivery) {
	if f.OnDelivery != nil {
		f.OnDelivery(ctx, d)
	}
}

// End calls f.OnEnd.
func (f SinkFuncs) End(e Ended) {
	if f.OnEnd != nil {
		f.OnEnd(e)
	}
}

// Delivery is one thing an Attachment hands its Sink, in revision order:
// either one visible change (Event) or the whole lobby (State).
type Delivery struct {
	Lobby string
	// Revision is the lobby revision the socket shows after rendering
	// this delivery. It grows with every delivery, starting above the
	// Snapshot that Join returned: never an older revision, never one
	// twice.
	Revision uint64
	// Event is the next visible change, at Revision. It is nil when State
	// is set.
	Event *Event
	// State is set instead of Event after a gap: the sink fell more than
	// its queue behind, or this process's watch of the lobby lost its
	// place (the log was compacted past it). It is the whole lobby as of
	// Revision; render it as a fresh start. The revisions in the gap are
	// not delivered.
	State *Snapshot
}

// DefaultSinkQueue is how many deliveries an Attachment holds for a Sink
// that does not keep up before it replaces them with one State.
const DefaultSinkQueue = 64

// RoomsOption configures Rooms.
type RoomsOption func(*roomsConfig) error

type roomsConfig struct {
	queue int
	retry time.Duration
}

// SinkQueue sets how many deliveries each Attachment holds for a Sink
// whose Send has not returned before the queue is replaced by one State
// (default DefaultSinkQueue). It must be positive.
func SinkQueue(n int) RoomsOption {
	return func(c *roomsConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: SinkQueue %d: must be positive", ErrInvalidOption, n)
		}
		c.queue = n
		return nil
	}
}

// ErrDetached is returned by an Attachment's methods once it is detached:
// after Close, Disconnect or Leave, or after its Sink was told End.
var ErrDetached = errors.New("lobby: attachment detached")

// Rooms fans a Service's lobbies out to the sockets of this process. A
// transport calls Join for each socket, with a Sink that writes to it, and
// gets an Attachment: the lobby's changes reach the Sink in revision order,
// whichever process committed them, and the Attachment carries the
// socket's Heartbeat and Disconnect, so the transport never keeps a
// (lobby, player, generation) of its own.
//
// However many sockets of one lobby this process holds, Rooms follows the
// lobby with one Watcher, opened with the first Attachment and closed when
// the last one is detached. Other processes' commits reach it through Run:
// run the Service's Run alongside Rooms.
//
// A slow Sink never holds back the lobby or other Sinks: each Attachment
// queues up to SinkQueue deliveries for its Sink, and past that replaces
// the queue with one State, the whole lobby as of the newest change, which
// later changes replace in turn until the Sink takes it. So a Sink that
// falls behind sees a gap marked by a State, never an older revision and
// never a revision twice. Ended connections are never dropped: End comes
// after the queued deliveries.
//
// Rooms is safe for concurrent use.
type Rooms struct {
	svc *Service
	cfg roomsConfig

	mu    sync.Mutex
	rooms map[string]*room
}

// NewRooms returns Rooms over svc. A nil svc or a bad option gives an
// error wrapping ErrInvalidOption.
func NewRooms(svc *Service, opts ...RoomsOption) (*Rooms, error) {
	if svc == nil {
		return nil, errNilOption("service")
	}
	cfg := roomsConfig{queue: DefaultSinkQueue, retry: time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, errNilOption("rooms option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Rooms{svc: svc, cfg: cfg, rooms: make(map[string]*room)}
	if svc.live != nil {
		svc.live.onLost(r.sessionLost)
	}
	return r, nil
}

// sessionLost tells the Attachments of lobby id whose connections ended
// with this Service's session (it could not be renewed in time) that they
// are over: their sockets must rejoin, through this process's next session
// or another process.
func (r *Rooms) sessionLost(id string, ended []Ended) {
	r.mu.Lock()
	rm := r.rooms[id]
	r.mu.Unlock()
	if rm == nil {
		return
	}
	var gone []*Attachment
	rm.mu.Lock()
	for a := range rm.atts {
		if a.pending {
			continue
		}
		for _, e := range ended {
			if e.Player == a.player && e.Gen == a.gen {
				a.finish(e)
				delete(rm.atts, a)
				gone = append(gone, a)
				break
			}
		}
	}
	rm.mu.Unlock()
	for range gone {
		r.release(rm)
	}
}

// room is one lobby followed for this process's Attachments: its Watcher
// and the goroutine that hands the Watcher's Changes to the Attachments.
type room struct {
	rs   *Rooms
	id   string
	w    *Watcher
	refs int // Attachments joined or joining; guarded by Rooms.mu

	stop context.CancelFunc // ends the pump

	mu   sync.Mutex // guards atts
	atts map[*Attachment]struct{}
}

// Join admits player to lobby id as Service.Join does, with the same
// errors (ErrLobbyFull, ErrLocked, ErrBlocked, ErrInvalidID, ...; a nil
// sink is ErrInvalidOption), and attaches sink to the lobby for the new
// connection. It returns the Attachment and the lobby as of the join (or
// later): what the socket renders first. A join that made no revision (a
// further tab with the same attributes) still returns the current lobby.
// The Sink's deliveries continue strictly after that Snapshot's revision,
// with nothing missed in between: the lobby's watch is in place before the
// join commits.
//
// A Sink that is also a [Starter] is told Start inside Join, before any
// delivery. Connections the join superseded are told End on their own
// Sinks, wherever their sockets are. On an error, nothing is attached and
// the Sink is never called.
func (r *Rooms) Join(ctx context.Context, id, player string, attrs map[string]string, sink Sink) (*Attachment, Snapshot, error) {
	if sink == nil {
		return nil, Snapshot{}, errNilOption("sink")
	}
	if err := rules.CheckID("lobby ID", id); err != nil {
		return nil, Snapshot{}, err
	}
	rm := r.acquire(id)
	a := &Attachment{room: rm, sink: sink, lobby: id, player: player, pending: true}
	// Attached before the join: every Change from here on is kept for
	// a until the join says which ones it already covers.
	rm.mu.Lock()
	rm.atts[a] = struct{}{}
	rm.mu.Unlock()

	var snap Snapshot
	var version uint64
	res, err := r.svc.transact(ctx, id, txn{cmd: rules.Join(player, attrs), view: func(st *rules.State, v uint64) {
		snap, version = snapshotOf(st), v
		// The first join of the room starts its watch at its own
		// commit; the lobby's lock keeps any other commit of this
		// Service from coming between.
		rm.w.register(st, v, false)
	}})
	if err != nil {
		rm.mu.Lock()
		delete(rm.atts, a)
		rm.mu.Unlock()
		r.release(rm)
		return nil, Snapshot{}, err
	}

	// Set before the Attachment stops pending: from then on, a push may
	// start its sender.
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.sender = a.send
	rm.mu.Lock()
	a.gen, a.version, a.rev = res.Gen, version, snap.Revision
	a.res = res
	rm.mu.Unlock()
	if st, ok := sink.(Starter); ok {
		// Still pending: what the room hands out meanwhile is kept in
		// a.early, so no Send can come before Start has returned.
		st.Start(a, snap)
	}
	rm.mu.Lock()
	a.pending = false
	early := a.early
	a.early = nil
	ended := false
	for i := range early {
		ended = a.take(&early[i]) || ended
	}
	if ended {
		delete(rm.atts, a)
	}
	rm.mu.Unlock()
	if ended {
		r.release(rm)
	}
	return a, snap, nil
}

// acquire returns the room of lobby id, opening it (and its watch) if this
// is its first Attachment.
func (r *Rooms) acquire(id string) *room {
	r.mu.Lock()
	defer r.mu.Unlock()
	rm := r.rooms[id]
	if rm == nil {
		ctx, stop := context.WithCancel(context.Background())
		rm = &room{rs: r, id: id, w: r.svc.newWatcher(id), stop: stop, atts: make(map[*Attachment]struct{})}
		r.rooms[id] = rm
		go rm.pump(ctx)
	}
	rm.refs++
	return rm
}

// release drops one reference to rm, closing its watch after the last.
func (r *Rooms) release(rm *room) {
	r.mu.Lock()
	rm.refs--
	last := rm.refs == 0
	if last {
		delete(r.rooms, rm.id)
	}
	r.mu.Unlock()
	if last {
		rm.stop()
		rm.w.Close()
	}
}

// Attached returns how many Attachments lobby id has in this process.
func (r *Rooms) Attached(id string) int {
	r.mu.Lock()
	rm := r.rooms[id]
	r.mu.Unlock()
	if rm == nil {
		return 0
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	n := 0
	for a := range rm.atts {
		if !a.pending {
			n++
		}
	}
	return n
}

// pump hands the room's Changes to its Attachments until the room closes.
func (rm *room) pump(ctx context.Context) {
	log := rm.rs.svc.log
	warned := false
	for {
		ch, err := rm.w.Next(ctx)
		switch {
		case err == nil:
			warned = false
			rm.dispatch(&ch)
			continue
		case ctx.Err() != nil || errors.Is(err, ErrWatchClosed):
			return
		case errors.Is(err, ErrNotRunning):
			// Run's start (or a commit of this Service) wakes the
			// watch; say once per stretch that other processes'
			// commits are not arriving meanwhile.
			if !warned {
				log.Warn("lobby rooms: Service.Run is not running; commits of other processes are held back", "lobby", rm.id)
				warned = true
			}
			select {
			case <-rm.w.Ready():
			case <-ctx.Done():
				return
			}
		default:
			log.Warn("lobby rooms: watch failed", "lobby", rm.id, "err", err)
			select {
			case <-rm.rs.svc.clock.After(rm.rs.cfg.retry):
			case <-ctx.Done():
				return
			}
		}
	}
}

// dispatch hands ch to every Attachment of the room, and detaches those
// whose connection it ended.
func (rm *room) dispatch(ch *Change) {
	var ended []*Attachment
	rm.mu.Lock()
	for a := range rm.atts {
		if a.pending {
			a.early = append(a.early, *ch)
			continue
		}
		if a.take(ch) {
			delete(rm.atts, a)
			ended = append(ended, a)
		}
	}
	rm.mu.Unlock()
	for range ended {
		rm.rs.release(rm)
	}
}

// Attachment is one socket attached to a lobby by Rooms.Join: the
// connection generation the join opened, and the Sink its lobby's changes
// go to. Its methods are safe for concurrent use.
type Attachment struct {
	room   *room
	sink   Sink
	lobby  string
	player string
	// ctx is the sender's: cancelled once the Attachment is detached.
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by room.mu: what the join covers, and the Changes kept
	// while it was in flight.
	gen     uint64
	version uint64 // the store version of the join's view
	rev     uint64 // the highest revision queued for the sink
	pending bool
	early   []Change
	res     Result // the join's; set with gen, then never changed

	mu       sync.Mutex // guards the fields below
	queue    []Delivery
	collapse bool // queue holds one State that newer changes replace
	end      *Ended
	detached bool
	sending  bool   // a goroutine runs send
	sender   func() // a.send, made once: starting it allocates nothing
}

// Lobby returns the lobby's ID.
func (a *Attachment) Lobby() string { return a.lobby }

// Player returns the player the socket belongs to.
func (a *Attachment) Player() string { return a.player }

// Gen returns the connection generation the join opened.
func (a *Attachment) Gen() uint64 { return a.gen }

// Result returns what the join did (Service.Join's Result). When the join
// made the revision of the Snapshot Join returned, its last Event is that
// revision, so a socket may render the change that admitted it instead of
// the bare Snapshot; a join that made no revision (a further tab) has no
// Events. Do not modify it: its Events may be shared with other Sinks.
func (a *Attachment) Result() Result { return a.res }

// take queues what ch holds for a's sink and reports whether it ended a's
// connection; room.mu is held.
func (a *Attachment) take(ch *Change) (ended bool) {
	if ch.Version <= a.version {
		return false // the join's view already shows it
	}
	if ch.Snapshot != nil {
		if ch.Snapshot.Revision > a.rev {
			a.rev = ch.Snapshot.Revision
			snap := *ch.Snapshot
			a.push(Delivery{Lobby: a.lobby, Revision: snap.Revision, State: &snap}, true)
		}
		return false
	}
	for i := range ch.Events {
		e := &ch.Events[i]
		if e.Revision > a.rev {
			a.rev = e.Revision
			a.push(Delivery{Lobby: a.lobby, Revision: e.Revision, Event: e}, false)
		}
	}
	for _, e := range ch.Ended {
		if e.Player == a.player && e.Gen == a.gen {
			a.finish(e)
			return true
		}
	}
	return false
}

// push queues u, or, with the queue full, replaces the queue with the
// state u leaves the lobby in; state: u is already a State.
func (a *Attachment) push(u Delivery, state bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.detached || a.end != nil {
		return
	}
	switch {
	case state || a.collapse || len(a.queue) >= a.room.rs.cfg.queue:
		if !state {
			snap := stateAfter(u.Event)
			u = Delivery{Lobby: u.Lobby, Revision: u.Revision, State: &snap}
		}
		a.queue = append(a.queue[:0], u)
		a.collapse = true
	default:
		a.queue = append(a.queue, u)
	}
	a.wakeLocked()
}

// stateAfter is the lobby as e leaves it: every event carries the whole
// view.
func stateAfter(e *Event) Snapshot {
	members := e.Members
	if members == nil {
		members = []MemberView{}
	}
	return Snapshot{Lobby: e.Lobby, Revision: e.Revision, Term: e.Term, Host: e.Host, Locked: e.Locked, Overrides: e.Overrides, Members: members}
}

// finish queues End after the queued deliveries.
func (a *Attachment) finish(e Ended) {
	a.mu.Lock()
	if !a.detached && a.end == nil {
		a.end = &e
		a.wakeLocked()
	}
	a.mu.Unlock()
}

// wakeLocked starts the sender if there is something to deliver and none
// runs; a.mu is held.
func (a *Attachment) wakeLocked() {
	if !a.sending && !a.detached && (len(a.queue) > 0 || a.end != nil) {
		a.sending = true
		go a.sender()
	}
}

// send runs the Sink's calls, in order, until nothing is left to deliver,
// the Attachment is detached or its End is delivered. At most one send runs
// at a time (a.sending).
func (a *Attachment) send() {
	for {
		a.mu.Lock()
		if a.detached {
			a.mu.Unlock()
			return
		}
		if len(a.queue) > 0 {
			u := a.queue[0]
			// Shifted down rather than resliced, so that the queue keeps
			// its array: a socket that keeps up allocates nothing per
			// delivery. The queue is at most SinkQueue long.
			n := copy(a.queue, a.queue[1:])
			a.queue[n] = Delivery{}
			a.queue = a.queue[:n]
			a.collapse = false
			a.mu.Unlock()
			a.sink.Send(a.ctx, u)
			continue
		}
		if end := a.end; end != nil {
			a.detached = true
			a.mu.Unlock()
			a.cancel()
			a.sink.End(*end)
			return
		}
		a.sending = false
		a.mu.Unlock()
		return
	}
}

// detach stops deliveries and releases the room; it reports false if the
// Attachment was already detached.
func (a *Attachment) detach() bool {
	a.mu.Lock()
	if a.detached || a.end != nil {
		a.mu.Unlock()
		return false
	}
	a.detached, a.queue = true, nil
	a.mu.Unlock()
	a.cancel()
	rm := a.room
	rm.mu.Lock()
	_, in := rm.atts[a]
	delete(rm.atts, a)
	rm.mu.Unlock()
	if in {
		rm.rs.release(rm)
	}
	return true
}

// Heartbeat keeps the connection alive (Service.Heartbeat). If the
// connection has ended without this process seeing it end (a stretch of
// the lobby's log it skipped), the outcome is OutcomeStale and the
// Attachment detaches itself: close the socket and have the client join
// again. After the Attachment is detached it returns ErrDetached.
func (a *Attachment) Heartbeat(ctx context.Context) (Result, error) {
	if a.isDetached() {
		return Result{}, ErrDetached
	}
	res, err := a.room.rs.svc.Heartbeat(ctx, a.lobby, a.player, a.gen)
	if err == nil && res.Outcome == OutcomeStale {
		a.detach()
	}
	return res, err
}

// Disconnect reports that the socket closed (Service.Disconnect) and
// detaches the Attachment first, so that its Sink is not told End for its
// own close. The member turns reconnecting if this was its last
// connection. After the Attachment is detached it returns ErrDetached.
func (a *Attachment) Disconnect(ctx context.Context) (Result, error) {
	if !a.detach() {
		return Result{}, ErrDetached
	}
	return a.room.rs.svc.Disconnect(ctx, a.lobby, a.player, a.gen)
}

// Leave removes the player from the lobby now, with every connection
// (Service.Leave), detaching this Attachment first. The player's other
// Attachments are told End (EndLeft). After the Attachment is detached it
// returns ErrDetached.
func (a *Attachment) Leave(ctx context.Context) (Result, error) {
	if !a.detach() {
		return Result{}, ErrDetached
	}
	return a.room.rs.svc.Leave(ctx, a.lobby, a.player)
}

// Close detaches the Attachment without telling the lobby anything: no
// further Sink call starts (a Send under way is told by its context), and
// the connection stays live until its heartbeat deadline passes. Use
// Disconnect for a socket that closed. Close is idempotent.
func (a *Attachment) Close() { a.detach() }

func (a *Attachment) isDetached() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.detached || a.end != nil
}
