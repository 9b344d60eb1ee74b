// Package store defines how lobbyhost persists lobbies: a small interface of
// versioned, opaque records, a per-lobby deadline index and a per-lobby
// effects log, plus the sentinel errors every implementation reports.
//
// A Store never interprets lobby rules. The lobby package encodes each lobby
// as bytes, computes its next deadline and what the commit means for the
// outside world (its effects), and asks the store to write all three in one
// atomic compare-and-set. Anything with a conditional write (a map under a
// mutex, SQL, Redis, etcd, DynamoDB) can implement it; package storetest
// checks that an implementation keeps the contract, and package
// store/memstore is the in-memory default.
//
// # Versions and floors
//
// Every lobby ID has a version. Before its first write an ID's version is
// the store-wide floor (below): 0 in a store that never folded a
// tombstone, else the highest floor folded so far, so an ID never written
// is not always at 0. Load reports it with ErrNotFound, and each successful
// [Store.Write] sets it to the expected version plus one. After
// [Store.Delete] the ID has no record, but its version is not forgotten: the
// store keeps a floor at or above every version it ever held for that ID, and
// [Store.Load] reports that floor, so a lobby created again continues above
// every value issued before instead of repeating one.
//
// Floors do not pile up. After Delete the store keeps a tombstone for the
// ID: the floor, the deleted lobby's last transition time
// ([Deletion.At]) and the deleted record's data, which Load returns. The
// tombstone lasts while the lobby still has entries in its effects log,
// and at least until the time the deleter asked it to be kept to
// ([Deletion.Keep]). Then [Store.TrimLog] drops it and folds its floor and
// its time into one store-wide floor: from then on Load reports, for every
// ID without a record or tombstone, at least the highest floor and the
// latest time ever folded. A store therefore holds per ID only what its
// retention and the deleters' Keep times ask for, and a lobby ID's
// versions still never repeat. (The lobby package builds every counter of
// a new lobby on the floor Load reports and starts its clock at the time
// Load reports, so revisions, join sequences, generations and transition
// times do not repeat or go backward either.)
//
// # The effects log
//
// A Write may carry an entry for the lobby's effects log: what the commit
// means outside the store (for lobbyhost, the events clients see and the
// connections the commit ended). The entry is appended in the same atomic
// step as the record, at the position of the version the write creates, so
// positions increase with every entry and are never reused for a lobby ID,
// also across Delete. Readers follow a lobby's log by position
// ([Store.ReadLog]): every process that serves a lobby reads what it needs,
// none drains it for the others.
//
// The log is kept for a bounded retention, by count per lobby and by age
// ([Retention]); a reader asking for a position older than what is kept gets
// a [CompactedError] and must start again from a fresh Load. Durable
// consumers (a relay to a message bus, an audit sink) keep a named cursor
// per lobby in the store ([Store.ClaimLog], [Store.CommitLog]), so each sees
// every effect at least once, in position order per lobby, and several
// processes sharing a consumer name split the lobbies between them.
//
// # Sizes and IDs
//
// Every store handles lobby IDs of 1 to [MaxIDLen] bytes of valid UTF-8, NUL
// included, as opaque bytes: two IDs are the same lobby only if they are
// equal byte for byte, whatever their case, normalisation or shared
// prefixes, and no ID is cut, folded or re-encoded. Other non-empty IDs (too
// long, invalid UTF-8) a store may refuse with ErrInvalid, writing nothing;
// if it accepts one, the same rules hold for it. Consumer names follow the
// same rules.
//
// Every store accepts a Write whose record Data and log entry together hold
// up to [MaxWriteBytes] bytes, and stores all of it: nothing is cut short. A
// larger Write it may refuse with ErrInvalid, writing nothing, but it never
// stores a part of one.
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
	// MaxIDLen is the longest lobby ID (and consumer name) in bytes every
	// store handles.
	MaxIDLen = 128
	// MaxWriteBytes bounds len(Write.Data) plus len(Write.Effects).
	MaxWriteBytes = 8 << 20
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
	// ErrCompacted: a log position older than what the store still keeps.
	// It comes wrapped in a *CompactedError.
	ErrCompacted = errors.New("store: log compacted")
	// ErrSessionEnded: a renewal of a session that is over: its deadline
	// has passed (judged by the caller's now), it was ended, or the store
	// never knew it or has forgotten it. A session that ended never lives
	// again. See [Sessions].
	ErrSessionEnded = errors.New("store: session ended")
)

// CompactedError reports a read of a lobby's log after a position whose
// successors were trimmed by retention. Entries after After up to and
// including Trimmed may be gone; the reader cannot know what they said, so
// it starts again from the lobby's current record (Load) and reads the log
// after that record's version. errors.Is(err, ErrCompacted) is true.
//
// A lobby created where the ID had neither record nor tombstone starts on
// the store-wide floor, and positions up to that floor may have belonged to
// an earlier lobby of the ID whose entries are gone: a read after a
// position below the floor reports a CompactedError (Trimmed at least the
// floor) even if nothing of the new lobby was trimmed. A reader that
// followed the earlier lobby thereby learns that it missed entries; a
// reader of the new lobby only, which starts from Load, never asks there.
type CompactedError struct {
	Lobby string
	// After is the position the reader asked to read after.
	After uint64
	// Trimmed bounds what may be gone: it is at least the highest position
	// after After that retention removed (or the floor a lobby was created
	// on), and below the oldest entry after After that is still kept, so
	// reading after Trimmed returns every kept entry and does not report
	// compaction again for the same trim. It is a bound, not the exact
	// position of a removed entry.
	Trimmed uint64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("store: log of lobby %q compacted: read after %d, entries up to %d may be gone", e.Lobby, e.After, e.Trimmed)
}

// Unwrap makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Unwrap() error { return ErrCompacted }

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
	// At is set only on the Record Load returns with ErrNotFound: the last
	// transition time of the lobby that ID held before, as Delete was told
	// it (Deletion.At) while its tombstone lasts, else the highest At of
	// every tombstone the store-wide floor absorbed (the zero time if
	// none). A lobby created over it must not run earlier. For a record
	// that exists, At is the zero time: the store does not keep Write.At
	// with the record. Stores keep it as Entry.At: location and monotonic
	// reading dropped, at least to the microsecond.
	At time.Time
}

// Entry is one entry of a lobby's effects log.
type Entry struct {
	// Lobby is the ID of the lobby whose write appended the entry.
	Lobby string
	// Version is the entry's position: the record version created by the
	// write that appended it. Positions of one lobby strictly increase and
	// are never reused, also across Delete.
	Version uint64
	// At is the time the writer gave the write (Write.At), as the store
	// keeps it: location and monotonic reading dropped, at least to the
	// microsecond.
	At time.Time
	// Data is the entry, opaque to the store.
	Data []byte
}

// Write is one atomic compare-and-set.
type Write struct {
	// ID names the lobby to write.
	ID string
	// Expected is the version the caller read: the record's Version, or the
	// floor Load reported with ErrNotFound. For an ID never written that
	// floor is the store-wide floor: 0 only while the store never folded a
	// tombstone, so a creator must Load first rather than assume 0. The
	// write succeeds only if the stored version still equals it, and then
	// sets the version to Expected+1.
	Expected uint64
	// Data replaces the record's data.
	Data []byte
	// Deadline replaces the record's deadline; zero removes the lobby from
	// the due index.
	Deadline time.Time
	// At is the commit's time as the writer sees it (lobbyhost passes the
	// lobby's transition time). The store keeps it with the log entry and
	// judges retention by age with it; it never reads a clock of its own.
	At time.Time
	// Effects, if not nil, is appended to the lobby's log at position
	// Expected+1 in the same atomic step as the record: either both are
	// stored or neither is. A nil Effects appends nothing (an empty non-nil
	// slice appends an empty entry).
	Effects []byte
	// Sessions, for a store with the [Sessions] capability, is the set of
	// sessions that hold live generations in the lobby after this write,
	// sorted in byte order without duplicates (nil or empty: none). In
	// the same atomic step as the record, the store adds the lobby to the
	// index of each session listed and removes it from the index of every
	// session the lobby's previous write listed and this one does not, so
	// [Sessions.SessionLobbies] always agrees with the last committed
	// write of each lobby. A session the store does not know (never
	// opened, or forgotten) is indexed all the same. A store without the
	// capability ignores the field. Write.Validate refuses an empty ID in
	// it and a list out of order or with duplicates.
	Sessions []string
}

// Validate reports the argument errors every Store.Write must refuse, as an
// error wrapping ErrInvalid: an empty ID, an Expected version that has no
// successor, or a Sessions list with an empty ID, out of byte order or
// with duplicates. Stores call it first; it does not look at the store.
func (w *Write) Validate() error {
	if w.ID == "" {
		return fmt.Errorf("%w: write with an empty lobby ID", ErrInvalid)
	}
	if w.Expected == math.MaxUint64 {
		return fmt.Errorf("%w: write to %q: no version follows %d", ErrInvalid, w.ID, w.Expected)
	}
	for i, id := range w.Sessions {
		if id == "" {
			return fmt.Errorf("%w: write to %q: empty session ID in Sessions", ErrInvalid, w.ID)
		}
		if i > 0 && w.Sessions[i-1] >= id {
			return fmt.Errorf("%w: write to %q: Sessions not sorted without duplicates at %q", ErrInvalid, w.ID, id)
		}
	}
	return nil
}

// Deletion is one conditional delete (see Store.Delete).
type Deletion struct {
	// ID names the lobby to delete.
	ID string
	// Expected is the version the caller read: Delete succeeds only if the
	// record still has it.
	Expected uint64
	// Floor is a lower bound for the tombstone's floor: it is at least
	// max(Expected, Floor).
	Floor uint64
	// At is the deleted lobby's last transition time. Load reports it
	// (Record.At) for the ID while its tombstone lasts, and the store-wide
	// floor keeps the highest At of every tombstone folded into it, so a
	// lobby created again under any ID never runs earlier than one that
	// was forgotten.
	At time.Time
	// Keep, if not the zero time, keeps the tombstone (its floor, At and
	// Data) at least until a TrimLog whose now is at or after Keep, even
	// once its log entries are gone (lobbyhost passes the end of the
	// latest block still in force, which the tombstone's data remembers).
	// The zero time keeps the tombstone only while its log has entries.
	Keep time.Time
}

// Validate reports the argument errors every Store.Delete must refuse, as
// an error wrapping ErrInvalid: an empty ID. Stores call it first; it does
// not look at the store.
func (d *Deletion) Validate() error {
	if d.ID == "" {
		return fmt.Errorf("%w: delete with an empty lobby ID", ErrInvalid)
	}
	return nil
}

// Due names a lobby whose deadline has come.
type Due struct {
	ID       string
	Deadline time.Time
}

// Cursor is where a durable consumer stands in one lobby's log: it has
// committed every entry up to and including After.
type Cursor struct {
	Lobby string
	After uint64
}

// Retention is how long a store keeps log entries.
//
// Entries bounds the count: each lobby keeps exactly its newest Entries
// entries (or all, while it has no more), the oldest going at the append
// that would make it hold Entries+1.
//
// Age bounds the time: [Store.TrimLog] removes an entry once it is older
// than Age, judged at TrimLog's now. An entry's age is judged by the latest
// At of it and of every earlier entry of its lobby, so that trimming by age
// always removes the oldest entries of a lobby first and never leaves a
// hole: an entry whose At is earlier than that of an entry before it (a
// writer whose clock went back) counts as being as old as that entry, and
// goes with it, not before.
//
// A zero field imposes no bound of its own; stores document their
// defaults. Durable consumers do not hold entries back: a consumer slower
// than the retention gets a CompactedError like any reader.
type Retention struct {
	Entries int
	Age     time.Duration
}

// Store persists lobbies. Implementations must be safe for concurrent use by
// many goroutines (and, for shared stores, many processes), and must never
// retain or modify a slice passed to or returned from a method: the caller
// owns what it passes and what it gets back. That covers the bytes between a
// slice's length and its capacity (a store must not append into a caller's
// buffer), the elements and order of a slice passed in, and every Data
// returned, which shares no memory with the store or with any other slice
// returned, up to its capacity.
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
	// Record holding only ID, Version, Data and At: Version is the floor to
	// pass as Write.Expected when creating it (the tombstone's floor after
	// Delete, else the store-wide floor, 0 in a store that never folded a
	// tombstone), Data is the data of the record Delete removed while its
	// tombstone lasts, as it was written, else nil, and At is the
	// tombstone's Deletion.At while it lasts, else the highest At folded
	// into the store-wide floor (the zero time if none).
	Load(ctx context.Context, id string) (Record, error)

	// Write stores w atomically if the lobby's version equals w.Expected
	// (counting an absent record as its floor): the record's data, its
	// deadline in the due index and the log entry, all or none. The new
	// version is w.Expected+1.
	//
	// No reader sees one part of the write without the others: once a Load
	// shows the new version, Due shows the new deadline and ReadLog the
	// entry (until retention trims it), and once Due or ReadLog shows them,
	// Load shows at least the new version.
	//
	// It returns ErrConflict if the version differs, ErrInvalid if w.ID is
	// empty or w.Expected is math.MaxUint64 (see Write.Validate); in both
	// cases it writes nothing. Any other error (a lost connection, a
	// context that ended mid-flight) leaves the outcome unknown: the write
	// may have committed. Load again before deciding; compare-and-set
	// makes a retry safe.
	Write(ctx context.Context, w Write) error

	// Delete removes the lobby's record and its deadline if its version
	// equals d.Expected, leaving a tombstone. The log is untouched: its
	// entries stay readable until retention trims them. Afterwards Load
	// reports ErrNotFound with a floor of at least max(d.Expected,
	// d.Floor), d.At as Record.At and the deleted record's data, for as
	// long as the tombstone lasts: while the lobby still has log entries,
	// and in any case until a TrimLog whose now is at or after d.Keep.
	// When it goes, its floor and At fold into the store-wide ones (see
	// TrimLog). The next Write must expect exactly the floor Load reports.
	//
	// It returns ErrNotFound if there is no record, ErrConflict if the
	// version differs, ErrInvalid if d.ID is empty (see
	// Deletion.Validate); in all three cases it changes nothing.
	Delete(ctx context.Context, d Deletion) error

	// Due returns up to limit lobbies whose deadline is at or before now,
	// ordered by deadline and then by ID (byte order), so that equal
	// deadlines come in one deterministic order. limit must be positive
	// (else ErrInvalid); now may be any time.Time. Due is read-only: it
	// changes nothing, so the same call returns the same lobbies until a
	// Write or Delete. To learn the next deadline at all, ask with a
	// far-future now and limit 1.
	Due(ctx context.Context, now time.Time, limit int) ([]Due, error)

	// ReadLog returns up to limit entries of the lobby's log whose
	// position is after the given one, in position order. limit must be
	// positive (else ErrInvalid). An empty result means no entry after
	// that position exists now. If retention trimmed an entry whose
	// position is after the given one, ReadLog returns a *CompactedError
	// instead (also for a lobby whose whole log, tombstone included, is
	// gone, when after is below the floor Load reports for it).
	ReadLog(ctx context.Context, id string, after uint64, limit int) ([]Entry, error)

	// LogHeads returns, for each ID in ids, the position of the newest
	// entry of its log (0 if it has none, or none is kept), in the order
	// of ids. It is how a reader that may have missed notifications finds
	// the lobbies whose logs moved, in one call.
	LogHeads(ctx context.Context, ids []string) ([]uint64, error)

	// TrimLog removes up to limit entries (of any lobbies) older than the
	// store's retention Age as judged at now (see Retention for how an
	// entry's age is judged), oldest first, and drops the
	// tombstones that are due: a tombstone goes once its log has no entry
	// left and its Deletion.Keep is zero or at or before now, and its
	// floor and At then fold into the store-wide floor (which keeps the
	// highest of each ever folded). It drops tombstones held by Keep also
	// when the store has no Age bound: Keep is a time bound of its own.
	//
	// It returns how many entries it removed plus how many tombstones it
	// dropped that had no entry left for this call to remove (a tombstone
	// whose last entry it removes goes with that entry and is not counted
	// again). That sum is at most limit, so a result below limit means
	// nothing more was due at now. It must not scan the whole log or every
	// lobby: stores keep an index by age and one by Keep. limit must be
	// positive (else ErrInvalid).
	TrimLog(ctx context.Context, now time.Time, limit int) (int, error)

	// ClaimLog is how a durable consumer called name finds work: it
	// returns up to limit lobbies whose log has entries after name's
	// cursor, each with that cursor, and claims them for name until
	// now+hold. Lobbies claimed under the same name less than hold ago
	// (judged by the now arguments, as in Claimer.Claim) are skipped, so
	// processes sharing a name split the lobbies and never get the same
	// lobby for overlapping holds; different names never affect each
	// other. limit and hold must be positive and name valid as an ID
	// (else ErrInvalid).
	//
	// A lobby counts as having entries after the cursor also when
	// retention trimmed every one of them: it is still returned, and its
	// ReadLog after the cursor reports a CompactedError, so a consumer
	// always learns that it missed entries; committing the CompactedError's
	// Trimmed (or a later position) ends that. This holds after the
	// lobby's tombstone folded too.
	//
	// The first ClaimLog (or RegisterConsumer) of a name registers it: a
	// consumer sees every entry appended by a Write that commits after
	// its registration returned, and none before (a new consumer starts
	// at the present). A lobby's cursor for name starts just before the
	// first entry name is due to see. Finding work costs in proportion to
	// the lobbies with work, never a scan of every lobby: stores keep, per
	// registered name, an index of lobbies with uncommitted entries,
	// updated by Write. Order: lobbies whose uncommitted work is oldest
	// first where the store can tell; never one that starves a lobby.
	ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]Cursor, error)

	// RegisterConsumer registers name as ClaimLog does, without claiming
	// anything. Registering a registered name changes nothing.
	RegisterConsumer(ctx context.Context, name string) error

	// CommitLog moves name's cursor for lobby id to after (never
	// backward: a lower value changes nothing) and releases name's claim
	// on the lobby, so the next ClaimLog returns it again only if entries
	// after the cursor exist (a Write that commits between ClaimLog and
	// CommitLog is never lost). A lobby name has no cursor for is left
	// alone: none of its entries was ever due to name, or the store
	// dropped a cursor with nothing left to deliver (when the lobby's
	// tombstone folded; the next entry there is due from its start). A
	// store never drops a cursor that has entries due, trimmed ones
	// included; only a store that loses its data as a whole (a server
	// restarted without persistence, which the adapter documents) loses
	// cursors, and the registrations and the log with them. An
	// unregistered name is ErrInvalid.
	CommitLog(ctx context.Context, name, id string, after uint64) error
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

// BatchWriter is an optional capability for stores a round trip away: it
// applies many conditional writes at the price of about one round trip.
// The Service uses it to commit the writes that arrive together (a burst
// of expiries in one sweep, heartbeats of many sockets) in one call.
type BatchWriter interface {
	// WriteBatch applies each of ws as Write would, and returns one
	// outcome per write, in the order of ws (len(errs) == len(ws)). Each
	// write is still its own compare-and-set: it commits or conflicts on
	// its own lobby's version alone, whatever happens to the others, and
	// none waits for another to commit. Writes to the same lobby ID apply
	// in the order given, as successive Writes would.
	//
	// Everything Write promises holds for each committed write of a
	// batch: its record, deadline and log entry are one atomic step that
	// no reader sees in part, also while the rest of the batch is still
	// being applied; it releases the lobby's Claim (see Claimer); count
	// retention trims the lobby's log at its append; and it adds a Change
	// to every Feed. Nothing is atomic across the writes of a batch.
	//
	// errs[i] is nil when ws[i] committed, wraps ErrConflict or ErrInvalid
	// when it wrote nothing for that reason, and is any other error when
	// its outcome is unknown (as for Write: a lost connection, a context
	// that ended mid-flight). An invalid write is refused alone; the
	// others still apply. The store keeps none of the slices it was
	// given.
	WriteBatch(ctx context.Context, ws []Write) []error
}

// Notifier is an optional capability for stores shared by several
// processes: it tells readers which lobbies' logs moved, so a process reads
// only the lobbies it serves that changed, promptly and without polling.
type Notifier interface {
	// Subscribe returns a Feed that receives a Change for every Write with
	// a log entry that commits after Subscribe returns, by any process,
	// and that stops receiving when ctx is done. A Change names the
	// position of that entry; a Write without Effects adds no Change. A Change is added only
	// once the write is visible: a reader that calls ReadLog after taking
	// it sees the entry. Where delivery may have failed (a lost
	// connection, a full feed) the store marks the feed lost instead; the
	// reader then checks the heads of the lobbies it serves once
	// (LogHeads). Writers never wait for a reader.
	Subscribe(ctx context.Context) (*Feed, error)
}

// Sessions is an optional capability for stores shared by several
// processes: liveness records of the processes that hold connections, and
// an index of the lobbies each one holds generations in.
//
// A process (a lobby.Service) opens a session with an ID of its own making
// and a deadline, and renews it well before the deadline: one write per
// process per renewal, however many connections it holds. The lobbies it
// holds generations in name it in their records, and each Write says which
// sessions the lobby holds after it ([Write.Sessions]), so the store keeps
// per session the set of lobbies to visit once the session is over.
//
// A session's deadline only moves forward while it lives, and once it has
// passed the session is over for good: a renewal judged at a now at or
// after the deadline fails, and the session's ID is never used again
// (lobbyhost makes IDs of 128 random bits). Stores never read clocks:
// every now is the caller's. Deadlines are kept to the nanosecond (location
// and monotonic reading dropped), as Record.Deadline is. Session IDs follow
// the rules of lobby IDs (see "Sizes and IDs" in the package
// documentation) and are compared byte for byte.
//
// Every method is atomic and linearizable like those of Store, honours its
// context first (a done context returns ctx.Err() and changes nothing),
// and keeps none of the slices passed in; slices returned belong to the
// caller.
//
// A session that is over and no longer holds any lobby may be forgotten
// (see ExpiredSessions), so the store's memory follows the live sessions
// and those still to be swept, not every session ever opened.
type Sessions interface {
	// OpenSession records a new session, alive until deadline. It returns
	// ErrConflict if the store knows id already (a session ID is never
	// reused), and ErrInvalid for an ID the store refuses (empty; too
	// long or invalid UTF-8 where the store refuses such lobby IDs) or a
	// zero deadline; in those cases it changes nothing.
	OpenSession(ctx context.Context, id string, deadline time.Time) error

	// RenewSession moves the session's deadline to max(current, deadline)
	// if the session is still alive at now, that is now is before its
	// current deadline; the check and the move are one atomic step, so of
	// two renewals racing a deadline none can revive a session the other
	// found over. It returns ErrSessionEnded, changing nothing, if the
	// deadline has passed at now, or the session was never opened, was
	// forgotten or ended by EndSession; ErrInvalid for an empty ID or a
	// zero deadline.
	RenewSession(ctx context.Context, id string, now, deadline time.Time) error

	// EndSession ends the session at once: its deadline becomes
	// min(current, at) (a draining process passes its now), every later
	// RenewSession fails whatever its now, and ExpiredSessions lists the
	// session from that deadline on while it holds lobbies. An unknown or forgotten
	// session is left alone without an error; ending a session twice
	// keeps the earlier deadline. ErrInvalid for an empty ID or a zero
	// at.
	EndSession(ctx context.Context, id string, at time.Time) error

	// SessionDeadlines returns each session's current deadline, in the
	// order of ids (one per ID, duplicates included): the zero time for
	// an ID the store does not know (never opened, or forgotten: it had
	// ended and held nothing any more). It does not keep ids.
	SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error)

	// ExpiredSessions returns up to limit sessions whose deadline is at
	// or before now and that still hold at least one lobby in the index,
	// each with its deadline, ordered by deadline and then by ID (byte
	// order). The same call returns the same sessions until a Write,
	// Delete or session call changes them: listing a session does not
	// claim or remove it; it leaves the list when the writes of the
	// lobbies it held drop it from their Sessions.
	//
	// A session whose deadline is at or before now and that holds no
	// lobby may be forgotten by this call: afterwards SessionDeadlines
	// reports the zero time for it, RenewSession ErrSessionEnded and
	// OpenSession of its ID succeeds again (which a caller that never
	// reuses IDs never asks for). A forgotten session that a later Write
	// lists is indexed but never listed here, having no deadline.
	//
	// Its cost is in proportion to what it returns and forgets, never a
	// scan of every session: stores keep an index by deadline. limit must
	// be positive (else ErrInvalid); now may be any time.
	ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]SessionDeadline, error)

	// SessionLobbies returns up to limit IDs of lobbies whose last
	// committed Write listed the session in Write.Sessions (and that were
	// not deleted since), in byte order, starting after the ID after (""
	// to start from the first). An unknown session holds no lobby unless
	// a Write listed it. limit must be positive (else ErrInvalid).
	SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error)
}

// SessionDeadline names a session and its deadline.
type SessionDeadline struct {
	ID       string
	Deadline time.Time
}
