// Package storetest is the conformance suite for implementations of
// store.Store: one call runs every check an adapter must pass before
// lobbyhost can rely on it.
//
// Call RunWith from a test in the adapter's package, with a function that
// hands each check a fresh, empty store of its own (its own schema, key
// prefix or database) and registers its cleanup with t.Cleanup, and one
// that does the same for a store keeping its effects log by a given
// retention:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunWith(t,
//			func(t *testing.T) store.Store { return newIsolatedStore(t) },
//			storetest.Options{NewRetained: func(t *testing.T, r store.Retention) store.Store {
//				return newIsolatedStore(t, withRetention(r))
//			}})
//	}
//
// Run(t, newStore) is RunWith without options: the retention checks then
// fail and say what to provide; every other check runs.
//
// Each check is a subtest with a stable name, so one can be run alone:
//
//	go test -race -run 'TestConformance/LogAtomic'
//
// The optional capabilities store.Claimer, store.Notifier,
// store.BatchWriter and store.Sessions are found by type assertion and
// checked when the store has them (their subtests say so and skip otherwise: a store without them
// is complete). The Batch checks hold WriteBatch to what the same Writes
// would do: one outcome per write in order, each its own compare-and-set,
// writes to one lobby applied in the order given, nothing kept of the
// caller's slices, nothing written with a done context, exactly one commit
// per version when batches and Writes race, a Change for every committed
// entry, and batches of hundreds of writes.
//
// # What the suite holds a store to
//
//   - Records round-trip exactly: the Data bytes (nil and empty count as the
//     same), the Version, and the Deadline as an instant compared with
//     time.Time.Equal at nanosecond precision. A store may drop the
//     location and the monotonic reading but not a single nanosecond. The
//     suite writes deadlines from 1969 to 2199; Due must also accept any now,
//     including year 9999.
//   - Log entries round-trip: one per Write with Effects, at the position
//     of the version it created, Data byte for byte, At to the microsecond.
//   - IDs are opaque bytes of valid UTF-8 (the suite uses 1 to 128 bytes,
//     NUL included): IDs that are prefixes of each other or contain ':', '{',
//     '}', '/', '*', '?', '[' or spaces never collide, and Due orders ties by
//     byte order, not by a collation. Consumer names likewise.
//   - Compare-and-set, floors, tombstones and their fold, the effects log,
//     retention, durable consumers and the due index as documented in
//     package store, checked sequentially, under concurrency (exactly one
//     winner per version, no lost update, no record without its entry, no
//     entry delivered twice to claimers sharing a name), by model-based
//     tests against a map-based reference (pgregory.net/rapid), and by a
//     linearizability check of concurrent Load/Write histories
//     (github.com/anishathalye/porcupine).
//   - Writes at the limit of package store (store.MaxWriteBytes of Data and
//     Effects together) are stored whole; IDs beyond store.MaxIDLen bytes or
//     invalid UTF-8 are refused with store.ErrInvalid or kept exactly.
//   - Readers (Load, Due, ReadLog) running beside concurrent writers never
//     see part of a write and never go back in time.
//   - Slices passed in are neither kept, nor written into (up to their
//     capacity), nor reordered; slices handed out share memory with nothing.
//   - A done context makes every method return the context's error promptly
//     and write (or register, claim, commit) nothing.
//   - Load and Delete of the empty ID may report either store.ErrInvalid or
//     store.ErrNotFound; Write of it must report store.ErrInvalid.
//
// When the linearizability check fails, it can write porcupine's HTML
// rendering of the offending history: set LOBBYHOST_STORETEST_VISUALIZE to a
// directory.
//
// The suite runs its checks one after another, never in parallel, and takes
// a few seconds on an in-memory store. Each check is bounded by
// CheckTimeout: its calls get a context that is done then, and a check
// that waits for its own goroutines fails saying what it waited for, so a
// store that hangs or fails a call fails the check it is in, never the
// whole test binary by its -timeout. The model-based checks ask for a new
// store on each of their iterations (100 by default, set with
// -rapid.checks), so store creation should be cheap or the store shared
// and isolated per call by a fresh namespace.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lobbyhost/lobbyhost/store"
)

// Options configure RunWith beyond the store constructor.
type Options struct {
	// NewRetained returns a fresh, empty store (isolated like newStore's)
	// that keeps its effects log by r: the count and age bounds the
	// retention checks (RetentionCount, TrimLog, TombstoneFold,
	// ModelRetained) need to choose. A zero field of r means no bound of
	// that kind. Without it those checks fail, saying what to provide:
	// retention is part of the contract, so it cannot go unchecked.
	NewRetained func(t *testing.T, r store.Retention) store.Store
	// PartitionedClaims declares that the store's ClaimLog claims its
	// partitions one after another rather than at one instant (a Redis
	// Cluster, whose scripts cannot span slots): a ClaimLog may then come
	// back with fewer lobbies than were available, each claimed at its own
	// instant. ConsumersLinearizable then checks each lobby a ClaimLog
	// returns as its own atomic claim (available, unclaimed, with its
	// cursor, never overlapping another), but not that a ClaimLog returns
	// min(limit, available). Declare it only for such a layout; a store on
	// one server should claim atomically.
	PartitionedClaims bool
}

// A check is one subtest of the suite.
type check struct {
	name string
	run  func(t *testing.T, e env)
}

// env is what a check builds its stores from.
type env struct {
	newStore func(*testing.T) store.Store
	opts     Options
}

// onStore adapts a check that needs a single fresh store.
func onStore(f func(h *harness)) func(*testing.T, env) {
	return func(t *testing.T, e env) {
		f(newHarness(t, e.newStore))
	}
}

// onRetained adapts a check that needs a single fresh store keeping its
// log by r.
func onRetained(r store.Retention, f func(h *harness)) func(*testing.T, env) {
	return func(t *testing.T, e env) {
		f(newHarness(t, e.retained(t, r)))
	}
}

// retained returns the constructor of stores keeping their log by r, or
// fails t if the adapter gave none.
func (e env) retained(t *testing.T, r store.Retention) func(*testing.T) store.Store {
	t.Helper()
	if e.opts.NewRetained == nil {
		t.Fatalf("this check needs stores with a chosen log retention (here %+v): "+
			"run the suite with storetest.RunWith(t, newStore, storetest.Options{NewRetained: func(t *testing.T, r store.Retention) store.Store {...}}), "+
			"returning a fresh store that trims its log by r", r)
	}
	return func(t *testing.T) store.Store { return e.opts.NewRetained(t, r) }
}

// checks is the suite, in the order Run runs it. Names are part of the API:
// adapters' CI configurations select and skip checks by them.
var checks = []check{
	{"RoundTrip", onStore(checkRoundTrip)},
	{"LoadMissing", onStore(checkLoadMissing)},
	{"CreateExisting", onStore(checkCreateExisting)},
	{"WriteStaleVersion", onStore(checkWriteStaleVersion)},
	{"ReadAfterWrite", onStore(checkReadAfterWrite)},
	{"Invalid", onStore(checkInvalid)},
	{"Aliasing", onStore(checkAliasing)},
	{"ContextCancelled", onStore(checkContextCancelled)},
	{"DeleteFloor", onStore(checkDeleteFloor)},
	{"DeleteStale", onStore(checkDeleteStale)},
	{"DeleteMissing", onStore(checkDeleteMissing)},
	{"DeleteKeepsLog", onStore(checkDeleteKeepsLog)},
	{"DeletePattern", onStore(checkDeletePattern)},
	{"AliasingTombstone", onStore(checkAliasingTombstone)},
	{"LogAppend", onStore(checkLogAppend)},
	{"LogRead", onStore(checkLogRead)},
	{"LogAtomic", onStore(checkLogAtomic)},
	{"LogHeads", onStore(checkLogHeads)},
	{"RetentionCount", onRetained(store.Retention{Entries: retainEntries}, checkRetentionCount)},
	{"TrimLog", onRetained(store.Retention{Age: time.Hour}, checkTrimLog)},
	{"TrimLogClockBack", onRetained(store.Retention{Age: time.Hour}, checkTrimLogClockBack)},
	{"TombstoneFold", onRetained(store.Retention{Age: time.Hour}, checkTombstoneFold)},
	{"TombstoneAt", onRetained(store.Retention{Age: time.Hour}, checkTombstoneAt)},
	{"TombstoneKeep", onRetained(store.Retention{}, checkTombstoneKeep)},
	{"TombstoneKeepEntries", onRetained(store.Retention{Age: time.Hour}, checkTombstoneKeepEntries)},
	{"TombstoneKeepNoAge", onRetained(store.Retention{}, checkTombstoneKeepNoAge)},
	{"FloorHigh", onRetained(store.Retention{Age: time.Hour}, checkFloorHigh)},
	{"Consumers", onStore(checkConsumers)},
	{"ConsumerRegistration", onStore(checkConsumerRegistration)},
	{"ConsumerClaims", onStore(checkConsumerClaims)},
	{"ConsumerCompacted", onRetained(store.Retention{Age: time.Hour}, checkConsumerCompacted)},
	{"ConsumersConcurrent", onStore(checkConsumersConcurrent)},
	{"ConsumersLinearizable", func(t *testing.T, e env) {
		checkConsumersLinearizable(newHarness(t, e.newStore), e.opts.PartitionedClaims)
	}},
	{"DueOrder", onStore(checkDueOrder)},
	{"DueMoves", onStore(checkDueMoves)},
	{"LargeRecord", onStore(checkLargeRecord)},
	{"MaxWrite", onStore(checkMaxWrite)},
	{"ManyLobbies", onStore(checkManyLobbies)},
	{"OpaqueIDs", onStore(checkOpaqueIDs)},
	{"DigitIDs", onStore(checkDigitIDs)},
	{"IDLimits", onStore(checkIDLimits)},
	{"ConcurrentWriters", onStore(checkConcurrentWriters)},
	{"ConcurrentReaders", onStore(checkConcurrentReaders)},
	{"Linearizable", onStore(checkLinearizable)},
	{"Model", func(t *testing.T, e env) { checkModel(t, e.newStore, false) }},
	{"ModelRetained", func(t *testing.T, e env) { checkModel(t, e.retained(t, modelRetention), true) }},
	{"Claim", onStore(checkClaim)},
	{"Subscribe", onStore(checkSubscribe)},
	{"SubscribeAfterCommit", onStore(checkSubscribeAfterCommit)},
	{"SubscribeFollow", onStore(checkSubscribeFollow)},
	{"BatchOutcomes", onStore(checkBatchOutcomes)},
	{"BatchSameLobby", onStore(checkBatchSameLobby)},
	{"BatchEmpty", onStore(checkBatchEmpty)},
	{"BatchAliasing", onStore(checkBatchAliasing)},
	{"BatchContextCancelled", onStore(checkBatchContextCancelled)},
	{"BatchConcurrent", onStore(checkBatchConcurrent)},
	{"BatchSubscribe", onStore(checkBatchSubscribe)},
	{"BatchLarge", onStore(checkBatchLarge)},
	{"BatchAtomic", onStore(checkBatchAtomic)},
	{"BatchReleasesClaim", onStore(checkBatchReleasesClaim)},
	{"BatchRetention", onRetained(store.Retention{Entries: retainEntries}, checkBatchRetention)},
	{"SessionOpen", onStore(checkSessionOpen)},
	{"SessionRenew", onStore(checkSessionRenew)},
	{"SessionEnd", onStore(checkSessionEnd)},
	{"SessionRenewAtomic", onStore(checkSessionRenewAtomic)},
	{"SessionIndex", onStore(checkSessionIndex)},
	{"SessionPatternIDs", onStore(checkSessionPatternIDs)},
	{"SessionExpired", onStore(checkSessionExpired)},
	{"SessionForget", onStore(checkSessionForget)},
	{"SessionIndexAtomic", onStore(checkSessionIndexAtomic)},
	{"SessionBatch", onStore(checkSessionBatch)},
	{"SessionContext", onStore(checkSessionContext)},
	{"SessionModel", func(t *testing.T, e env) { checkSessionModel(t, e.newStore) }},
}

// Run runs the conformance suite against the stores newStore returns, each
// check as a subtest of t. newStore is called at least once per subtest,
// with the subtest's t; it must return an empty store that no other call
// shares, and register with t.Cleanup whatever releases it. It may call
// t.Fatal or t.Skip (say, when a server is not configured). Its stores
// may trim their logs by their default retention, as long as they keep at
// least MinDefaultEntries entries per lobby and trim by age only in
// TrimLog (which only the retention checks call).
//
// Run is RunWith without options: the checks that need a chosen retention
// fail and say so; every other check runs.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	RunWith(t, newStore, Options{})
}

// RunWith runs the conformance suite as Run does, with opts.
func RunWith(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	t.Helper()
	e := env{newStore: newStore, opts: opts}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, e)
		})
	}
}

// MinDefaultEntries is the fewest log entries per lobby the stores Run's
// newStore returns may keep: the checks that use them write fewer than
// this to any one lobby and expect to read them all back.
const MinDefaultEntries = 1000

// harness is a store under test with helpers that fail the test on any
// unexpected outcome, saying what was expected and what came back.
type harness struct {
	t   *testing.T
	s   store.Store
	ctx context.Context
}

func newHarness(t *testing.T, newStore func(*testing.T) store.Store) *harness {
	t.Helper()
	s := newStore(t)
	if s == nil {
		t.Fatal("newStore returned a nil store")
	}
	return &harness{t: t, s: s, ctx: checkContext(t)}
}

// CheckTimeout bounds every check of the suite. The check's calls run with
// a context that is done then, and a check that waits for goroutines it
// started, or for a signal from one, fails saying what it waited for
// instead of hanging until the test binary's -timeout, which would swallow
// what the other checks reported.
const CheckTimeout = 2 * time.Minute

// checkContext returns the context of one check: t's, done after
// CheckTimeout.
func checkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), CheckTimeout)
	t.Cleanup(cancel)
	return ctx
}

// wait waits for wg, and fails the check saying it waited for what if
// the check's time runs out first. The goroutines of wg must not use h.t:
// they may still run when it fails.
func (h *harness) wait(wg *sync.WaitGroup, what string) {
	h.t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	h.recv(done, what)
}

// closeOnce closes ch unless it is closed already. Only the check's own
// goroutine closes its stop channels, so checking first is safe.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// recv waits until ch is closed (or yields a value), and fails the check
// saying it waited for what if the check's time runs out first.
func (h *harness) recv(ch <-chan struct{}, what string) {
	h.t.Helper()
	select {
	case <-ch:
	case <-h.ctx.Done():
		h.t.Fatalf("still waiting for %s when the check's time ran out (%v): %v", what, CheckTimeout, context.Cause(h.ctx))
	}
}

// t0 is the suite's reference time: deadlines are built around it, and its
// nanoseconds catch a store that rounds.
var t0 = time.Date(2031, time.March, 14, 15, 9, 26, 535897932, time.UTC)

// later is a now at which every deadline the suite writes around t0 is due.
var later = t0.Add(50 * 365 * 24 * time.Hour)

// cmpOpts compare records, dues and entries: times as instants, nil and empty
// byte slices as the same.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	// bytes.Equal treats nil and empty as equal, and is much faster than
	// a reflective walk over 100 KiB records.
	cmp.Comparer(bytes.Equal),
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != reflect.TypeFor[[]byte]() }, cmpopts.EquateEmpty()),
}

// diff returns cmp.Diff(want, got) with the suite's options.
func diff(want, got any) string { return cmp.Diff(want, got, cmpOpts) }

// write performs w and fails unless it succeeds. A zero w.At becomes t0:
// the suite gives every write a time (lobbyhost always does).
func (h *harness) write(w store.Write) {
	h.t.Helper()
	if w.At.IsZero() {
		w.At = t0
	}
	if err := h.s.Write(h.ctx, w); err != nil {
		h.t.Fatalf("Write(ID %q, Expected %d) = %v, want nil", w.ID, w.Expected, err)
	}
}

// writeErr performs w and fails unless it returns an error matching want.
func (h *harness) writeErr(w store.Write, want error) {
	h.t.Helper()
	if w.At.IsZero() {
		w.At = t0
	}
	if err := h.s.Write(h.ctx, w); !errors.Is(err, want) {
		h.t.Fatalf("Write(ID %q, Expected %d) = %v, want %v", w.ID, w.Expected, err, want)
	}
}

func (h *harness) load(id string) store.Record {
	h.t.Helper()
	r, err := h.s.Load(h.ctx, id)
	if err != nil {
		h.t.Fatalf("Load(%q) = %v, want nil", id, err)
	}
	return r
}

// loadMissing loads an ID that must have no record and returns its floor,
// checking that the Record carries nothing else.
// loadMissing wants Load(id) to be ErrNotFound with only the ID, a floor
// (which it returns) and the tombstone data (nil for an ID never written,
// the deleted record's data after Delete).
func (h *harness) loadMissing(id string, data []byte) uint64 {
	h.t.Helper()
	r, err := h.s.Load(h.ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("Load(%q) = %+v, %v; want error %v", id, r, err, store.ErrNotFound)
	}
	if d := diff(store.Record{ID: id, Version: r.Version, Data: data}, r); d != "" {
		h.t.Fatalf("Load(%q) of a missing lobby: want only ID, floor and the deleted record's data (-want +got):\n%s", id, d)
	}
	return r.Version
}

// expectRecord loads want.ID and compares the whole record with want.
// Large data is compared apart, so a mismatch reports where, not 100 KiB.
func (h *harness) expectRecord(want store.Record) {
	h.t.Helper()
	got := h.load(want.ID)
	if len(want.Data) > 1024 || len(got.Data) > 1024 {
		if !bytes.Equal(want.Data, got.Data) {
			at := 0
			for at < min(len(want.Data), len(got.Data)) && want.Data[at] == got.Data[at] {
				at++
			}
			h.t.Fatalf("Load(%q): Data of %d bytes, want %d bytes; first difference at byte %d", want.ID, len(got.Data), len(want.Data), at)
		}
		want.Data, got.Data = nil, nil
	}
	if d := diff(want, got); d != "" {
		h.t.Fatalf("Load(%q) mismatch (-want +got):\n%s", want.ID, d)
	}
}

func (h *harness) due(now time.Time, limit int) []store.Due {
	h.t.Helper()
	d, err := h.s.Due(h.ctx, now, limit)
	if err != nil {
		h.t.Fatalf("Due(%v, %d) = %v, want nil", now, limit, err)
	}
	return d
}

func (h *harness) expectDue(now time.Time, limit int, want []store.Due) {
	h.t.Helper()
	if d := diff(want, h.due(now, limit)); d != "" {
		h.t.Fatalf("Due(%v, %d) mismatch (-want +got):\n%s", now, limit, d)
	}
}

// readLog reads id's log after after and fails on any error.
func (h *harness) readLog(id string, after uint64, limit int) []store.Entry {
	h.t.Helper()
	got, err := h.s.ReadLog(h.ctx, id, after, limit)
	if err != nil {
		h.t.Fatalf("ReadLog(%q, %d, %d) = %v, want nil", id, after, limit, err)
	}
	return got
}

// expectLog reads everything after after in id's log and compares it with
// want by lobby, position and data (At is LogAppend's business).
func (h *harness) expectLog(id string, after uint64, want []store.Entry) {
	h.t.Helper()
	got := h.readLog(id, after, len(want)+100)
	if d := diff(withoutAt(want), withoutAt(got)); d != "" {
		h.t.Fatalf("ReadLog(%q, %d) mismatch (-want +got):\n%s", id, after, d)
	}
}

// withoutAt returns a copy of entries with every At cleared.
func withoutAt(entries []store.Entry) []store.Entry {
	out := make([]store.Entry, len(entries))
	for i, e := range entries {
		e.At = time.Time{}
		out[i] = e
	}
	return out
}

// compacted wants ReadLog(id, after) to report a *store.CompactedError for
// id and after, and returns its Trimmed.
func (h *harness) compacted(id string, after uint64) uint64 {
	h.t.Helper()
	got, err := h.s.ReadLog(h.ctx, id, after, 100)
	var ce *store.CompactedError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) {
		h.t.Fatalf("ReadLog(%q, %d) = %d entries, %s; want a *store.CompactedError wrapping %v", id, after, len(got), describe(err), store.ErrCompacted)
	}
	if ce.Lobby != id || ce.After != after {
		h.t.Fatalf("ReadLog(%q, %d): CompactedError names lobby %q after %d, want %q after %d", id, after, ce.Lobby, ce.After, id, after)
	}
	if ce.Trimmed <= after {
		h.t.Fatalf("ReadLog(%q, %d): CompactedError with Trimmed %d, want above the position read after", id, after, ce.Trimmed)
	}
	return ce.Trimmed
}

func (h *harness) heads(ids ...string) []uint64 {
	h.t.Helper()
	got, err := h.s.LogHeads(h.ctx, ids)
	if err != nil {
		h.t.Fatalf("LogHeads(%q) = %v, want nil", ids, err)
	}
	if len(got) != len(ids) {
		h.t.Fatalf("LogHeads(%q) = %d heads, want one per ID", ids, len(got))
	}
	return got
}

// state is what the store shows about a set of lobbies: used to prove that
// a refused call changed nothing.
type state struct {
	Records []loaded
	Due     []store.Due
	Logs    []logState
	Heads   []uint64
}

type loaded struct {
	Record   store.Record
	NotFound bool
}

type logState struct {
	Entries []store.Entry
	Err     string
}

func (h *harness) state(ids ...string) state {
	h.t.Helper()
	var st state
	for _, id := range ids {
		r, err := h.s.Load(h.ctx, id)
		switch {
		case err == nil:
		case errors.Is(err, store.ErrNotFound):
		default:
			h.t.Fatalf("Load(%q) = %v, want nil or %v", id, err, store.ErrNotFound)
		}
		st.Records = append(st.Records, loaded{Record: r, NotFound: err != nil})
		entries, err := h.s.ReadLog(h.ctx, id, 0, 10000)
		var ls logState
		switch {
		case err == nil:
			ls.Entries = entries
		case errors.Is(err, store.ErrCompacted):
			ls.Err = err.Error()
		default:
			h.t.Fatalf("ReadLog(%q, 0, 10000) = %v, want nil or %v", id, err, store.ErrCompacted)
		}
		st.Logs = append(st.Logs, ls)
	}
	st.Due = h.due(later, 10000)
	if len(ids) > 0 {
		st.Heads = h.heads(ids...)
	}
	return st
}

// unchanged fails if the store now shows anything different from before.
func (h *harness) unchanged(before state, after string) {
	h.t.Helper()
	var ids []string
	for _, r := range before.Records {
		ids = append(ids, r.Record.ID)
	}
	if d := diff(before, h.state(ids...)); d != "" {
		h.t.Fatalf("%s changed the store (-before +after):\n%s", after, d)
	}
}

// entry builds the log entry that a write creating version v of lobby id
// with Effects data appends.
func entry(id string, v uint64, data string) store.Entry {
	return store.Entry{Lobby: id, Version: v, Data: []byte(data)}
}

// within runs f and fails the test if it takes longer than a generous bound:
// the suite's way to say "promptly" without depending on timing otherwise.
// f must not use t.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(promptly):
		t.Fatalf("%s did not return within %v", what, promptly)
	}
}

// promptly bounds calls that must not block.
const promptly = 10 * time.Second

func describe(err error) string {
	if err == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", err.Error())
}
