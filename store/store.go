// Package store defines how lobbyhost persists lobbies: a small interface of
// versioned, opaque records, a per-lobby deadline index and an outbox of
// events, plus the sentinel errors every implementation reports.
//
// A Store never interprets lobby rules. The lobby package encodes each lobby
// as bytes, computes its next deadline and its events, and asks the store to
// write all three in one atomic compare-and-set. Anything with a conditional
// write (a map under a mutex, SQL, Redis, etcd, DynamoDB) can implement it;
// package storetest checks that an implementation keeps the contract, and
// package store/memstore is the in-memory default.
//
// # Versions and floors
//
// Every lobby ID has a version. It is 0 before the first write, and each
// successful [Store.Write] sets it to the expected version plus one. After
// [Store.Delete] the ID has no record, but its version is not forgotten: the
// store keeps a floor at or above every version it ever held for that ID, and
// [Store.Load] reports that floor, so a lobby created again continues above
// every value issued before instead of repeating one. The store also keeps
// the deleted record's data with the floor (a tombstone) and Load returns it:
// the lobby package deletes only empty lobbies, whose record then carries
// what must outlive the record (its last transition time), so time never
// runs backward for an ID either.
//
// # Outbox
//
// Events written with a record are delivered after the commit by a relay that
// calls [Store.Pending] and, once it has published them, [Store.Ack]. Delivery
// is at least once: an event stays pending until acknowledged, and events of
// one lobby come back in the order they were written.
//
// # Sizes and IDs
//
// Every store handles lobby IDs of 1 to [MaxIDLen] bytes of valid UTF-8, NUL
// included, as opaque bytes: two IDs are the same lobby only if they are
// equal byte for byte, whatever their case, normalisation or shared
// prefixes, and no ID is cut, folded or re-encoded. Other non-empty IDs (too
// long, invalid UTF-8) a store may refuse with ErrInvalid, writing nothing;
// if it accepts one, the same rules hold for it.
//
// Every store accepts a Write carrying up to [MaxWriteEvents] events whose
// Data, together with the record's Data, total up to [MaxWriteBytes] bytes,
// and stores all of it: no record or event is cut short and no event is
// dropped. A larger Write it may refuse with ErrInvalid, writing nothing, but
// it never stores a part of one.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits every Store must accept (see "Sizes and IDs" above). They are floors
// for stores, not ceilings: a store may accept more.
const (
	// MaxIDLen is the longest lobby ID in bytes every store handles.
	MaxIDLen = 128
	// MaxWriteBytes bounds len(Write.Data) plus the len(Data) of every
	// event of the Write.
	MaxWriteBytes = 8 << 20
	// MaxWriteEvents bounds len(Write.Events).
	MaxWriteEvents = 1024
)

// Sentinel errors. Implementations return them (possibly wrapped, so compare
// with errors.Is) exactly in the situations each method's documentation names.
// A cancelled or expired context is reported with the context's own error.
var (
	// ErrNotFound: the lobby has no record (never written, or deleted).
	ErrNotFound = errors.New("store: lobby not found")
	// ErrConflict: the stored version is not the expected one. Nothing was written.
	ErrConflict = errors.New("store: version conflict")
	// ErrInvalid: the arguments break the method's contract (an empty ID, a
	// non-positive limit, ...). Nothing was written.
	ErrInvalid = errors.New("store: invalid argument")
)

// Record is a lobby as the store keeps it.
type Record struct {
	// ID is the lobby ID, compared byte for byte.
	ID string
	// Version is the record's compare-and-set counter: 1 after the first
	// write, one more after each later write.
	Version uint64
	// Data is the encoded lobby, opaque to the store.
	Data []byte
	// Deadline is the earliest moment at which the lobby has work to do
	// without any command (a heartbeat or reconnect deadline). The zero time
	// means none: the lobby is not in the due index.
	Deadline time.Time
}

// Event is one outbox entry.
type Event struct {
	// Lobby is the ID of the lobby that wrote the event.
	Lobby string
	// Seq orders the events of one lobby; lobbyhost uses the lobby revision
	// the event announces. Seq strictly increases across the writes of a
	// lobby, also across Delete, so (Lobby, Seq) identifies an event.
	Seq uint64
	// Data is the encoded event, opaque to the store.
	Data []byte
}

// Write is one atomic compare-and-set.
type Write struct {
	// ID names the lobby to write.
	ID string
	// Expected is the version the caller read: the record's Version, or the
	// floor Load reported with ErrNotFound (0 for an ID never written). The
	// write succeeds only if the stored version still equals it, and then
	// sets the version to Expected+1.
	Expected uint64
	// Data replaces the record's data.
	Data []byte
	// Deadline replaces the record's deadline; zero removes the lobby from
	// the due index.
	Deadline time.Time
	// Events are appended to the outbox in this order, in the same atomic
	// step as the record: either both are stored or neither is.
	Events []Event
}

// Validate reports the argument errors every Store.Write must refuse, as an
// error wrapping ErrInvalid: an empty ID, an event naming another lobby, or
// an Expected version that has no successor. Stores call it first; it does
// not look at the store.
func (w *Write) Validate() error {
	if w.ID == "" {
		return fmt.Errorf("%w: write with an empty lobby ID", ErrInvalid)
	}
	if w.Expected == math.MaxUint64 {
		return fmt.Errorf("%w: write to %q: no version follows %d", ErrInvalid, w.ID, w.Expected)
	}
	for i := range w.Events {
		if w.Events[i].Lobby != w.ID {
			return fmt.Errorf("%w: event %d names lobby %q in a write to %q", ErrInvalid, i, w.Events[i].Lobby, w.ID)
		}
	}
	return nil
}

// Due names a lobby whose deadline has come.
type Due struct {
	ID       string
	Deadline time.Time
}

// Store persists lobbies. Implementations must be safe for concurrent use by
// many goroutines (and, for shared stores, many processes), and must never
// retain or modify a slice passed to or returned from a method: the caller
// owns what it passes and what it gets back. That covers the bytes between a
// slice's length and its capacity (a store must not append into a caller's
// buffer), the elements and order of an []Event passed in (Write.Events,
// Ack's events), and every Data returned, which shares no memory with the
// store or with any other slice returned, up to its capacity.
//
// Every method is atomic and linearizable: it takes effect at one instant
// between its call and its return, so a reader never sees a version older
// than one a call that returned before it saw, and never sees part of a
// Write or a Delete.
//
// Every method first honours its context: if ctx is already done it returns
// ctx.Err() and writes nothing.
type Store interface {
	// Load returns the lobby's current record.
	//
	// If the lobby has no record, Load returns ErrNotFound together with a
	// Record holding only ID, Version and Data: Version is the floor to pass
	// as Write.Expected when creating it (0 for an ID never written, or the
	// floor kept by Delete), and Data is nil for an ID never written, or the
	// data of the record Delete removed (the tombstone), as it was written.
	Load(ctx context.Context, id string) (Record, error)

	// Write stores w atomically if the lobby's version equals w.Expected
	// (counting an absent record as its floor): the record's data, its
	// deadline in the due index and the events in the outbox, all or none.
	// The new version is w.Expected+1.
	//
	// No reader sees one part of the write without the others: once a Load
	// shows the new version, Due shows the new deadline and Pending the
	// events (until a later Write, Delete or Ack changes them), and once Due
	// or Pending shows them, Load shows at least the new version.
	//
	// It returns ErrConflict if the version differs, ErrInvalid if w.ID is
	// empty, an event names another lobby, or w.Expected is math.MaxUint64
	// (see Write.Validate); in both cases it writes nothing.
	// Any other error (a lost connection, a context that ended mid-flight)
	// leaves the outcome unknown: the write may have committed. Load again
	// before deciding; compare-and-set makes a retry safe.
	Write(ctx context.Context, w Write) error

	// Delete removes the lobby's record and its deadline if its version
	// equals expected. The outbox is untouched: pending events stay pending.
	// Afterwards Load reports ErrNotFound with a floor of at least
	// max(expected, floor) and the deleted record's data, and the next Write
	// must expect exactly that floor.
	//
	// It returns ErrNotFound if there is no record, ErrConflict if the
	// version differs; in both cases it changes nothing.
	Delete(ctx context.Context, id string, expected, floor uint64) error

	// Due returns up to limit lobbies whose deadline is at or before now,
	// ordered by deadline and then by ID (byte order), so that equal
	// deadlines come in one deterministic order. limit must be positive
	// (else ErrInvalid); now may be any time.Time. Due is read-only: it
	// changes nothing, so the same call returns the same lobbies until a
	// Write or Delete. To learn the next deadline at all, ask with a
	// far-future now and limit 1.
	Due(ctx context.Context, now time.Time, limit int) ([]Due, error)

	// Pending returns up to limit unacknowledged outbox events, oldest write
	// first across all lobbies (the order in which the writes committed,
	// not grouped by lobby), the events of one write in the order given.
	// limit must be positive (else ErrInvalid); a limit cuts a prefix of
	// that order. Pending does not hide what it returns: a second call
	// returns the same events until they are acked.
	Pending(ctx context.Context, limit int) ([]Event, error)

	// Ack removes the events named by (Lobby, Seq) from the outbox, and no
	// other event (not one of another lobby whose ID shares a prefix, not
	// the lobby's earlier events). Data is ignored; unknown or already
	// acknowledged events are skipped without stopping the others or
	// causing an error, and an empty list is fine.
	Ack(ctx context.Context, events []Event) error
}

// Claimer is an optional capability for stores shared by several processes:
// it lets sweepers divide due lobbies among themselves instead of all
// racing for the same ones. Racing is still correct (compare-and-set lets
// exactly one transition commit), only wasteful.
type Claimer interface {
	// Claim is Due that skips lobbies claimed by another call less than hold
	// ago, and claims the lobbies it returns until now+hold. A Write to a
	// lobby releases its claim. Holds are judged by the now arguments of
	// the calls, never by a clock of the store: a claim made at now with
	// hold h stops counting for a Claim whose now is at or after now+h.
	// Claim returns lobbies in Due's order and claims only those it
	// returns; concurrent Claims never return the same lobby for
	// overlapping holds. limit and hold must be positive (else ErrInvalid).
	Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]Due, error)
}

// Notifier is an optional capability for stores shared by several processes:
// it tells a relay that some process appended outbox events, so it can
// publish them promptly without polling.
type Notifier interface {
	// Notify returns a channel that receives a value after writes that
	// append outbox events, by any process. Values are coalesced (one may
	// stand for many writes), and writes without events (heartbeats) need
	// not notify at all. A value is sent only once the write is visible: a
	// reader that calls Pending after receiving it sees the write's events
	// (so a reader that reads only when notified misses no write). Writers
	// never wait for a reader that does not receive. The channel is closed
	// when ctx is done.
	Notify(ctx context.Context) (<-chan struct{}, error)
}
