package storetest_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// simpleStore is the plainest correct store: one mutex over maps and
// slices. With a flaw set, it breaks exactly one rule of the contract, the
// way real adapters tend to; the suite must catch each flaw. It scans where
// a real store would keep an index (TrimLog, ClaimLog): the suite cannot see
// the cost of a call, only its result.
type simpleStore struct {
	flaw flaw
	ret  store.Retention

	wmu sync.Mutex // serialises writers for the flaws that split a write in two
	mu  sync.Mutex
	// guarded by mu
	records map[string]store.Record // lobbies with a record
	floors  map[string]uint64       // version or floor of every ID with a record or a tombstone
	tombs   map[string][]byte       // a deleted record's data, while its log lasts
	logs    map[string]*simpleLog   // every ID with a record or a tombstone
	global  uint64                  // the store-wide floor: every folded floor is at or below it
	tombAt  map[string]time.Time    // a tombstone's Deletion.At
	keeps   map[string]time.Time    // a tombstone's Deletion.Keep, if it has one
	lastAt  time.Time               // the latest At folded (zero if none)
	index   map[string]store.Due    // the due index: lobbies with a deadline
	claims  map[string]time.Time    // Claim: claimed until
	cache   map[string]store.Record
	replica map[string]store.Record // what staleReplica's every second Load reads
	loads   int
	subs    []*store.Feed

	consumers map[string]map[string]work // registered names → lobbies (by key) with uncommitted entries
	cursors   map[string]uint64          // by ckey(name, lobby key)
	logClaims map[string]time.Time       // ClaimLog: claimed until, by ckey(name, lobby key)
	appends   uint64                     // counts appends, to order ClaimLog by oldest work

	writes  atomic.Int64                      // writeFailsNowAndThen: Writes so far
	forward map[*store.Feed]chan store.Change // feedDropsUnderLoad's buffers
	silent  int                               // batchNoChange: batches under way, whose appends notify nobody
	inBatch int                               // batchSkipsRetention: batches under way

	sessions map[string]*simpleSession // store.Sessions: by session ID
	sessHeld map[string][]string       // lobby key → the Sessions of its last write
}

// simpleLog is one lobby's effects log and its trimmed marker: the highest
// position retention removed (or, for a lobby created from nothing, the
// store-wide floor at its creation: nothing at or below it can be read).
type simpleLog struct {
	id      string
	entries []store.Entry
	trimmed uint64
}

type work struct {
	id  string
	seq uint64
}

// A flaw is one way to break the contract.
type flaw struct {
	name  string
	check string // the suite's check that must fail because of it
}

var (
	noFlaw = flaw{name: "none"}

	// Versions and compare-and-set.

	// Write checks the version, releases the lock, then writes: two
	// writers expecting the same version can both win.
	lostUpdate = flaw{"lost-update", "ConcurrentWriters"}
	// Write ignores Expected altogether.
	ignoresExpected = flaw{"ignores-expected", "WriteStaleVersion"}
	// A Write expecting 0 replaces an existing record (create-or-replace).
	createOverwrites = flaw{"create-overwrites", "CreateExisting"}
	// Write accepts Expected = MaxUint64, whose successor wraps to 0.
	expectedOverflows = flaw{"expected-overflows", "Invalid"}
	// Write publishes the new version, then (after a window) the new data.
	tornWrite = flaw{"torn-write", "Linearizable"}
	// Load is served from a cache that writes and deletes do not invalidate.
	staleCache = flaw{"stale-cache", "ReadAfterWrite"}
	// Every second Load reads a replica that writes reach after a window:
	// a reader can see a version, then an older one.
	staleReplica = flaw{"stale-replica", "ConcurrentReaders"}

	// Records and IDs.

	// Deadlines are kept to the microsecond (a timestamp column).
	microsecondDeadlines = flaw{"microsecond-deadlines", "RoundTrip"}
	// The Unix epoch is taken for "no deadline".
	epochIsNone = flaw{"epoch-is-no-deadline", "RoundTrip"}
	// Load of a missing lobby returns a Record without its ID.
	missingWithoutID = flaw{"missing-load-without-id", "LoadMissing"}
	// A shorter record is copied over the old buffer, whose tail stays.
	keepsStaleTail = flaw{"keeps-stale-tail", "LargeRecord"}
	// Record Data is kept up to 4 MiB and silently cut.
	truncatesData = flaw{"truncates-data", "MaxWrite"}
	// Effects are kept up to 4 MiB and silently cut.
	truncatesEffects = flaw{"truncates-effects", "MaxWrite"}
	// IDs are compared without case (a case-insensitive collation).
	foldsCase = flaw{"folds-case", "OpaqueIDs"}
	// IDs are cut to MaxIDLen bytes (a fixed-width key column).
	truncatesIDs = flaw{"truncates-long-ids", "IDLimits"}
	// Consumer cursors are keyed by the consumer name and the lobby ID
	// concatenated, so ("relay", "12") and ("relay1", "2") share one.
	concatenatedKeys = flaw{"concatenated-cursor-keys", "DigitIDs"}

	// Ownership of slices.

	// Write keeps the caller's Data slice instead of a copy.
	aliasesData = flaw{"aliases-data", "Aliasing"}
	// Write keeps the caller's Effects slice instead of a copy.
	aliasesEffects = flaw{"aliases-effects", "Aliasing"}
	// Write NUL-terminates its copy with append, writing into the caller's
	// spare capacity.
	appendsIntoCallerData = flaw{"appends-into-caller-data", "Aliasing"}
	// LogHeads sorts the caller's IDs in place.
	headsSortsIDs = flaw{"heads-sorts-ids", "Aliasing"}
	// ReadLog returns the entries' Data as pieces of one buffer.
	readLogSharesBuffer = flaw{"readlog-shares-buffer", "Aliasing"}
	// ReadLog returns the stored entries' Data itself.
	readLogAliases = flaw{"readlog-returns-stored-data", "Aliasing"}

	// The due index.

	// Due orders by ID alone.
	dueByID = flaw{"due-by-id", "DueOrder"}
	// Due orders by deadline alone, ties by the length of the ID.
	dueTiesUnsorted = flaw{"due-ties-unsorted", "DueOrder"}
	// Due takes deadline < now instead of deadline <= now.
	dueExclusive = flaw{"due-exclusive", "DueOrder"}
	// Due removes what it returns (a queue, not an index).
	duePops = flaw{"due-pops", "DueOrder"}
	// Due returns at most 4096 lobbies, whatever the limit.
	dueCapped = flaw{"due-capped", "ManyLobbies"}
	// Due is not told when a deadline is cleared (a stale index entry).
	dueKeepsCleared = flaw{"due-keeps-cleared", "DueMoves"}
	// Delete removes the record but leaves its deadline in the index.
	deleteKeepsDeadline = flaw{"delete-keeps-deadline", "DueMoves"}
	// Write commits record and entry, then (after a window) the index.
	dueSeparateStep = flaw{"due-separate-step", "ConcurrentReaders"}

	// Delete and floors.

	// Delete forgets the ID's version: a re-created lobby starts at 1.
	forgetsFloor = flaw{"forgets-floor", "DeleteFloor"}
	// Delete keeps the floor argument, even below the deleted version.
	floorIgnoresExpected = flaw{"floor-ignores-expected", "DeleteFloor"}
	// Delete ignores the expected version.
	deleteIgnoresVersion = flaw{"delete-ignores-version", "DeleteStale"}
	// Delete of a missing lobby raises its floor anyway.
	deleteMissingSetsFloor = flaw{"delete-missing-sets-floor", "DeleteMissing"}
	// Delete keeps the floor but not the deleted record's data.
	tombstoneDropsData = flaw{"tombstone-drops-data", "DeleteKeepsLog"}
	// Delete also drops the lobby's log.
	deleteDropsLog = flaw{"delete-drops-log", "DeleteKeepsLog"}
	// A lobby created again starts a new log: the old entries go.
	recreateClearsLog = flaw{"recreate-clears-log", "DeleteKeepsLog"}

	// The effects log.

	// Write appends its entry before checking the version.
	effectsOnConflict = flaw{"effects-on-conflict", "LogAtomic"}
	// Write publishes its entry, then (after a window) its record.
	effectsBeforeRecord = flaw{"effects-before-record", "LogAtomic"}
	// Write publishes its record, then (after a window) its entry.
	recordBeforeEffects = flaw{"record-before-effects", "LogAtomic"}
	// An entry's position counts the lobby's entries instead of being the
	// version its write created.
	positionIsCount = flaw{"position-is-entry-count", "LogAppend"}
	// At is kept to the millisecond.
	atMilliseconds = flaw{"at-to-the-millisecond", "LogAppend"}
	// An empty, non-nil Effects appends nothing.
	emptyEffectsDropped = flaw{"empty-effects-dropped", "LogAppend"}
	// ReadLog includes the entry at the position it reads after.
	readLogInclusive = flaw{"readlog-inclusive", "LogRead"}
	// ReadLog returns the newest entries first.
	readLogNewestFirst = flaw{"readlog-newest-first", "LogRead"}
	// ReadLog returns at most 100 entries, whatever the limit.
	readLogCapped = flaw{"readlog-capped", "LogRead"}
	// ReadLog removes what it returns (a queue, not a log).
	readLogDrains = flaw{"readlog-drains", "LogRead"}
	// ReadLog takes a limit of 0 as "no limit".
	readLogZeroLimit = flaw{"readlog-accepts-zero-limit", "Invalid"}
	// LogHeads reports the record's version, not the newest entry's.
	headIsVersion = flaw{"head-is-version", "LogHeads"}
	// LogHeads answers in byte order of the IDs, not in the order asked.
	headsSorted = flaw{"heads-in-id-order", "LogHeads"}

	// Retention.

	// No count retention: entries pile up.
	keepsEveryEntry = flaw{"count-retention-ignored", "RetentionCount"}
	// Count retention counts the entries of the whole store, not of each
	// lobby.
	retentionStoreWide = flaw{"count-retention-store-wide", "RetentionCount"}
	// Count retention keeps the entries a consumer has not committed.
	consumersHoldEntries = flaw{"consumers-hold-retention", "RetentionCount"}
	// ReadLog returns what is left, without reporting that entries went.
	compactionUnreported = flaw{"compaction-unreported", "RetentionCount"}
	// CompactedError.Trimmed names the oldest trimmed position.
	trimmedLowest = flaw{"trimmed-names-oldest", "RetentionCount"}
	// TrimLog removes the newest old entries first.
	trimNewestFirst = flaw{"trim-newest-first", "TrimLog"}
	// TrimLog removes every old entry, whatever the limit.
	trimIgnoresLimit = flaw{"trim-ignores-limit", "TrimLog"}
	// TrimLog judges age by the machine's clock, not by its now argument.
	trimByWallClock = flaw{"trim-by-wall-clock", "TrimLog"}
	// TrimLog returns its limit, not how many it removed.
	trimCountsLimit = flaw{"trim-returns-limit", "TrimLog"}
	// A deleted lobby created again forgets what retention trimmed from
	// its log: a read below the trimmed position is not compacted.
	recreateForgetsTrim = flaw{"recreate-forgets-trim", "TombstoneFold"}
	// A tombstone stays after its lobby's last entry is trimmed.
	tombstoneOutlivesLog = flaw{"tombstone-outlives-log", "TombstoneFold"}
	// Folding a tombstone forgets its floor.
	foldForgetsFloor = flaw{"fold-forgets-floor", "TombstoneFold"}
	// The store-wide floor is the last folded floor, not the highest.
	foldLowersFloor = flaw{"fold-lowers-floor", "TombstoneFold"}
	// Load of a tombstone reports no At (the deleter's time is dropped).
	tombstoneForgetsAt = flaw{"tombstone-forgets-at", "TombstoneAt"}
	// Folding a tombstone forgets its At: IDs without a record report none.
	foldForgetsAt = flaw{"fold-forgets-at", "TombstoneAt"}
	// The store-wide At is the last folded, not the latest.
	foldLowersAt = flaw{"fold-lowers-at", "TombstoneAt"}
	// Delete ignores Keep: the tombstone goes with its last entry.
	keepIgnored = flaw{"keep-ignored", "TombstoneKeep"}
	// TrimLog looks at Keep times only when the store has an Age bound.
	keepNeedsAge = flaw{"keep-needs-age-bound", "TombstoneKeep"}
	// TrimLog drops tombstones at their Keep but does not count them.
	keepUncounted = flaw{"keep-folds-uncounted", "TombstoneKeep"}
	// A Keep left from an earlier Delete deletes the lobby written since.
	staleKeepDeletes = flaw{"stale-keep-deletes", "TombstoneKeep"}
	// A tombstone whose last entry is trimmed goes, even before its Keep.
	keepLostWithLog = flaw{"keep-lost-with-log", "TombstoneKeepEntries"}
	// A tombstone goes at its Keep although its log still has entries.
	keepDropsLog = flaw{"keep-drops-log", "TombstoneKeepNoAge"}

	// Durable consumers.

	// A new consumer's cursors start at 0: it sees entries written before
	// it registered.
	consumerStartsAtZero = flaw{"consumer-starts-at-zero", "Consumers"}
	// RegisterConsumer returns at once and registers the name a moment
	// later: writes in between are lost to it.
	registersLate = flaw{"registers-late", "ConsumerRegistration"}
	// All consumer names share one cursor per lobby.
	consumersShareCursors = flaw{"consumers-share-cursors", "Consumers"}
	// ClaimLog hands out lobbies claimed under the same name again.
	logClaimsNotHeld = flaw{"logclaims-not-held", "ConsumerClaims"}
	// ClaimLog finds unclaimed lobbies, releases the lock, then claims
	// them: concurrent claimers can get the same lobby.
	logClaimSplit = flaw{"logclaim-check-then-set", "ConsumersConcurrent"}
	// CommitLog sets the cursor even when it moves it back.
	commitMovesBack = flaw{"commit-moves-back", "ConsumerClaims"}
	// CommitLog forgets the lobby, although a write came after the
	// position committed.
	commitLosesWrite = flaw{"commit-loses-write", "ConsumerClaims"}
	// CommitLog releases the claim at once but moves the cursor only
	// after a window: a ClaimLog in between hands out the old cursor.
	commitAppliedLate = flaw{"commit-cursor-late", "ConsumersLinearizable"}
	// ClaimLog returns (and claims) every lobby with work, whatever the
	// limit.
	logClaimIgnoresLimit = flaw{"logclaim-ignores-limit", "Model"}
	// CommitLog of an unregistered name registers it instead of ErrInvalid.
	commitRegisters = flaw{"commit-registers", "Invalid"}
	// CommitLog of a lobby without a cursor makes one at the position
	// given, so entries written later up to it are never due.
	commitMakesCursor = flaw{"commit-makes-cursor", "Consumers"}
	// ClaimLog takes a hold of 0.
	logClaimZeroHold = flaw{"logclaim-zero-hold", "Invalid"}

	// Clauses of the contract that are easy to miss.

	// Floors are compared as signed 64-bit numbers (a bigint column or a
	// sorted set's score): a floor at or above 2^63 loses to a small one.
	floorSigned = flaw{"floor-signed", "FloorHigh"}
	// Delete takes its ID as a glob pattern (SCAN MATCH, KEYS) and
	// deletes every lobby it matches.
	deleteGlob = flaw{"delete-matches-glob", "DeletePattern"}
	// Delete takes its ID as a LIKE pattern and deletes every lobby it
	// matches.
	deleteLike = flaw{"delete-matches-like", "DeletePattern"}
	// Load of a deleted lobby returns the tombstone's own data.
	tombstoneDataShared = flaw{"tombstone-data-shared", "AliasingTombstone"}
	// WriteBatch commits every record of the batch, then (after a window)
	// appends their entries.
	batchEntriesLate = flaw{"batch-entries-late", "BatchAtomic"}
	// A batched write leaves the lobby's claim in place.
	batchKeepsClaim = flaw{"batch-keeps-claim", "BatchReleasesClaim"}
	// Entries appended by WriteBatch escape count retention.
	batchSkipsRetention = flaw{"batch-skips-retention", "BatchRetention"}
	// Count retention keeps one entry more than Entries.
	countKeepsOneMore = flaw{"count-retention-keeps-one-more", "RetentionCount"}
	// Age retention judges each entry by its own At: an entry older than
	// the one before it goes first, leaving a hole.
	ageByOwnAt = flaw{"age-by-own-at", "TrimLogClockBack"}
	// Age retention removes an old entry with every earlier entry of its
	// lobby, however recent.
	ageTakesEarlier = flaw{"age-takes-earlier-entries", "TrimLogClockBack"}
	// ClaimLog skips a lobby whose entries after the cursor were all
	// trimmed: its consumer never learns it missed them.
	claimSkipsCompacted = flaw{"claim-skips-compacted", "ConsumerCompacted"}
	// A Write without Effects adds a Change too.
	changeForBareWrite = flaw{"change-for-bare-write", "Subscribe"}
	// A lobby created from nothing starts its log with nothing trimmed,
	// although positions up to the floor may have been another lobby's.
	freshForgetsFloor = flaw{"fresh-lobby-forgets-floor", "TombstoneFold"}
	// Creating a lobby that has neither record nor tombstone also accepts
	// Expected 0 after a fold, repeating versions.
	createAtZero = flaw{"create-at-zero-after-fold", "TombstoneFold"}

	// Failures.

	// Every writeFailEvery-th Write fails without writing, as a lost
	// connection would: a check must report it, not wait for the write
	// forever.
	writeFailsNowAndThen = flaw{"write-fails-now-and-then", "ConsumerRegistration"}

	// Context.

	// Nothing looks at the context.
	ignoresContext = flaw{"ignores-context", "ContextCancelled"}
	// Only the log and consumer methods ignore the context.
	logIgnoresContext = flaw{"log-ignores-context", "ContextCancelled"}
	// Write looks at the context only after committing.
	contextAfterWrite = flaw{"context-checked-after-write", "ContextCancelled"}

	// Optional capabilities.

	// Claim hands out claimed lobbies again.
	claimsNotHeld = flaw{"claims-not-held", "Claim"}
	// Claim judges holds by the machine's clock, not by its now argument.
	claimsByWallClock = flaw{"claims-by-wall-clock", "Claim"}
	// Claim returns its lobbies in reverse order.
	claimReversed = flaw{"claim-reversed", "Claim"}
	// A Write leaves the lobby's claim in place.
	writeKeepsClaim = flaw{"write-keeps-claim", "Claim"}
	// Claim takes a hold of 0 (a claim that holds nothing).
	claimZeroHold = flaw{"claim-zero-hold", "Invalid"}
	// Feeds never receive anything.
	feedSilent = flaw{"feed-silent", "Subscribe"}
	// A Change names the version the write expected, not the entry's.
	changeWrongVersion = flaw{"change-names-expected", "Subscribe"}
	// Only the first subscriber's feed receives changes.
	feedFirstOnly = flaw{"feed-first-subscriber-only", "Subscribe"}
	// Changes pass through a one-slot buffer to a goroutine that adds
	// them to the feed; when the buffer is full the Change is dropped,
	// and the feed not marked lost (the wake-up pattern of a plain
	// notification channel, wrong for named changes).
	feedDropsUnderLoad = flaw{"feed-drops-under-load", "SubscribeFollow"}
	// Write adds the Change, then (after a window) commits.
	feedBeforeCommit = flaw{"feed-before-commit", "SubscribeAfterCommit"}

	// Batches (store.BatchWriter).

	// WriteBatch returns the outcomes in reverse order.
	batchReversed = flaw{"batch-outcomes-reversed", "BatchOutcomes"}
	// WriteBatch leaves out the nil outcomes at the end of the batch.
	batchShortResult = flaw{"batch-short-result", "BatchOutcomes"}
	// WriteBatch runs in one transaction that rolls back when a write
	// conflicts: every write of the batch then reports the conflict.
	batchConflictFailsAll = flaw{"batch-conflict-fails-all", "BatchOutcomes"}
	// The same for an invalid write: the whole batch is refused.
	batchInvalidFailsAll = flaw{"batch-invalid-fails-all", "BatchOutcomes"}
	// WriteBatch stores records and entries but leaves the due index as
	// it was.
	batchSkipsDue = flaw{"batch-skips-due-index", "BatchOutcomes"}
	// WriteBatch stores records and deadlines but appends no entry.
	batchSkipsLog = flaw{"batch-skips-log", "BatchOutcomes"}
	// WriteBatch applies the writes in reverse order (a stack), so writes
	// to one lobby apply in another order than given.
	batchReordered = flaw{"batch-same-lobby-reordered", "BatchSameLobby"}
	// An empty batch is ErrInvalid (one outcome for no write).
	batchEmptyInvalid = flaw{"batch-empty-invalid", "BatchEmpty"}
	// WriteBatch keeps the caller's Data slices.
	batchAliasesData = flaw{"batch-aliases-data", "BatchAliasing"}
	// WriteBatch keeps the caller's Effects slices.
	batchAliasesEffects = flaw{"batch-aliases-effects", "BatchAliasing"}
	// WriteBatch sends its first chunk of 8 writes without looking at the
	// context, and looks only before each later chunk: a done context
	// leaves the batch written in part.
	batchPartialOnCancel = flaw{"batch-partial-on-cancel", "BatchContextCancelled"}
	// WriteBatch checks every version under the lock, releases it, then
	// commits: racing batches can both win a version.
	batchCheckThenSet = flaw{"batch-check-then-set", "BatchConcurrent"}
	// Writes committed by WriteBatch add no Change to the feeds.
	batchNoChange = flaw{"batch-adds-no-change", "BatchSubscribe"}
	// WriteBatch sends the first 256 writes and reports the rest as
	// committed without sending them (a cap on a script's arguments).
	batchCapped = flaw{"batch-capped", "BatchLarge"}

	// Sessions (store.Sessions).

	// RenewSession takes a session as alive while now <= deadline.
	sessionRenewAtDeadline = flaw{"session-renew-at-deadline", "SessionRenew"}
	// RenewSession sets the deadline asked for, also an earlier one.
	sessionDeadlineBackward = flaw{"session-deadline-backward", "SessionRenew"}
	// RenewSession checks the session, then (after a window) sets the
	// later of the deadline it read and the one asked for.
	sessionRenewSplit = flaw{"session-renew-check-then-set", "SessionRenewAtomic"}
	// Write commits the record, then (after a window) the session index.
	sessionIndexAfterRecord = flaw{"session-index-after-record", "SessionIndexAtomic"}
	// Write updates the session index, then (after a window) the record.
	sessionIndexBeforeRecord = flaw{"session-index-before-record", "SessionIndexAtomic"}
	// Write adds the lobby to the sessions listed but never removes it
	// from those the previous write listed.
	sessionIndexKeepsDropped = flaw{"session-index-keeps-dropped", "SessionIndex"}
	// Delete leaves the lobby in the session index.
	sessionDeleteKeepsIndex = flaw{"session-delete-keeps-index", "SessionIndex"}
	// ExpiredSessions takes deadline < now instead of deadline <= now.
	expiredExclusive = flaw{"expired-sessions-exclusive", "SessionExpired"}
	// EndSession ends renewals but leaves the deadline index as it was:
	// the session is listed only at its old deadline.
	expiredIgnoresEnd = flaw{"expired-ignores-end", "SessionExpired"}
	// ExpiredSessions removes what it lists (a queue, not an index).
	expiredPops = flaw{"expired-sessions-pop", "SessionExpired"}
	// ExpiredSessions orders by ID alone.
	expiredByID = flaw{"expired-sessions-by-id", "SessionExpired"}
	// RenewSession of an unknown (forgotten) session opens it.
	sessionRenewUpserts = flaw{"session-renew-upserts", "SessionForget"}
	// ExpiredSessions forgets every session over, also those holding a
	// lobby.
	sessionForgetsHolding = flaw{"session-forgets-holding", "SessionForget"}
	// SessionLobbies takes the session ID as a glob pattern.
	sessionLobbiesGlob = flaw{"session-lobbies-glob", "SessionPatternIDs"}
	// OpenSession of a known ID replaces it.
	sessionReopenOverwrites = flaw{"session-reopen-overwrites", "SessionOpen"}
	// WriteBatch ignores Sessions.
	batchSkipsSessions = flaw{"batch-skips-sessions", "SessionBatch"}
	// The session methods ignore the context.
	sessionsIgnoreContext = flaw{"sessions-ignore-context", "SessionContext"}
	// EndSession sets the deadline to at, also a later one.
	sessionEndExtends = flaw{"session-end-extends", "SessionEnd"}
	// An ended session can be renewed while now is before its deadline.
	sessionEndRenewable = flaw{"session-end-renewable", "SessionEnd"}
)

var flaws = []flaw{
	lostUpdate, ignoresExpected, createOverwrites, expectedOverflows, tornWrite, staleCache, staleReplica,
	microsecondDeadlines, epochIsNone, missingWithoutID, keepsStaleTail, truncatesData, truncatesEffects,
	foldsCase, truncatesIDs, concatenatedKeys,
	aliasesData, aliasesEffects, appendsIntoCallerData, headsSortsIDs, readLogSharesBuffer, readLogAliases,
	dueByID, dueTiesUnsorted, dueExclusive, duePops, dueCapped, dueKeepsCleared, deleteKeepsDeadline, dueSeparateStep,
	forgetsFloor, floorIgnoresExpected, deleteIgnoresVersion, deleteMissingSetsFloor, tombstoneDropsData, deleteDropsLog, recreateClearsLog,
	effectsOnConflict, effectsBeforeRecord, recordBeforeEffects, positionIsCount, atMilliseconds, emptyEffectsDropped,
	readLogInclusive, readLogNewestFirst, readLogCapped, readLogDrains, readLogZeroLimit, headIsVersion, headsSorted,
	keepsEveryEntry, retentionStoreWide, consumersHoldEntries, compactionUnreported, trimmedLowest,
	trimNewestFirst, trimIgnoresLimit, trimByWallClock, trimCountsLimit, recreateForgetsTrim, tombstoneOutlivesLog, foldForgetsFloor, foldLowersFloor,
	tombstoneForgetsAt, foldForgetsAt, foldLowersAt, keepIgnored, keepNeedsAge, keepUncounted, staleKeepDeletes, keepLostWithLog, keepDropsLog,
	consumerStartsAtZero, registersLate, consumersShareCursors, logClaimsNotHeld, logClaimSplit, commitAppliedLate, commitMovesBack, commitLosesWrite, logClaimIgnoresLimit, commitRegisters, commitMakesCursor, logClaimZeroHold,
	ignoresContext, logIgnoresContext, contextAfterWrite, writeFailsNowAndThen,
	floorSigned, deleteGlob, deleteLike, tombstoneDataShared, batchEntriesLate, batchKeepsClaim, batchSkipsRetention,
	countKeepsOneMore, ageByOwnAt, ageTakesEarlier, claimSkipsCompacted, changeForBareWrite, freshForgetsFloor, createAtZero,
	claimsNotHeld, claimsByWallClock, claimReversed, writeKeepsClaim, claimZeroHold,
	feedSilent, changeWrongVersion, feedFirstOnly, feedBeforeCommit, feedDropsUnderLoad,
	batchReversed, batchShortResult, batchConflictFailsAll, batchInvalidFailsAll, batchSkipsDue, batchSkipsLog,
	batchReordered, batchEmptyInvalid, batchAliasesData, batchAliasesEffects, batchPartialOnCancel,
	batchCheckThenSet, batchNoChange, batchCapped,
	sessionRenewAtDeadline, sessionDeadlineBackward, sessionRenewSplit, sessionIndexAfterRecord, sessionIndexBeforeRecord,
	sessionIndexKeepsDropped, sessionDeleteKeepsIndex, expiredExclusive, expiredIgnoresEnd, expiredPops, expiredByID,
	sessionRenewUpserts, sessionForgetsHolding, sessionLobbiesGlob, sessionReopenOverwrites, batchSkipsSessions,
	sessionsIgnoreContext, sessionEndExtends, sessionEndRenewable,
}

var (
	_ store.Store       = (*simpleStore)(nil)
	_ store.Claimer     = (*simpleStore)(nil)
	_ store.Notifier    = (*simpleStore)(nil)
	_ store.BatchWriter = (*simpleStore)(nil)
	_ store.Sessions    = (*simpleStore)(nil)
)

func newSimpleStore(f flaw, r store.Retention) *simpleStore {
	return &simpleStore{
		flaw:      f,
		ret:       r,
		records:   map[string]store.Record{},
		floors:    map[string]uint64{},
		tombs:     map[string][]byte{},
		tombAt:    map[string]time.Time{},
		keeps:     map[string]time.Time{},
		logs:      map[string]*simpleLog{},
		index:     map[string]store.Due{},
		claims:    map[string]time.Time{},
		cache:     map[string]store.Record{},
		replica:   map[string]store.Record{},
		consumers: map[string]map[string]work{},
		cursors:   map[string]uint64{},
		logClaims: map[string]time.Time{},
		sessions:  map[string]*simpleSession{},
		sessHeld:  map[string][]string{},
	}
}

// writeFailEvery is how often writeFailsNowAndThen's Write fails: within
// the first writes of any check that writes much.
const writeFailEvery = 30

// errInjected is writeFailsNowAndThen's failure.
var errInjected = errors.New("simplestore: connection reset (injected)")

// window is where a flawed write lets others in between its two halves,
// as the network round trip between two statements would.
func window() {
	runtime.Gosched()
	time.Sleep(20 * time.Microsecond)
}

func (s *simpleStore) ctxErr(ctx context.Context) error {
	if s.flaw == ignoresContext {
		return nil
	}
	return ctx.Err()
}

// logCtxErr is ctxErr for the log and consumer methods.
func (s *simpleStore) logCtxErr(ctx context.Context) error {
	if s.flaw == logIgnoresContext {
		return nil
	}
	return s.ctxErr(ctx)
}

func (s *simpleStore) key(id string) string {
	switch s.flaw {
	case foldsCase:
		return strings.ToLower(id)
	case truncatesIDs:
		return id[:min(len(id), store.MaxIDLen)]
	}
	return id
}

// ckey names a consumer's state for one lobby.
func (s *simpleStore) ckey(name, k string) string {
	switch s.flaw {
	case concatenatedKeys:
		return name + k
	case consumersShareCursors:
		return k
	}
	return fmt.Sprintf("%q/%q", name, k)
}

// patternMatches reports whether the ID pattern, taken as a glob
// (deleteGlob) or a LIKE pattern (deleteLike), matches k.
func (s *simpleStore) patternMatches(pattern, k string) bool {
	if s.flaw == deleteGlob {
		ok, err := path.Match(pattern, k)
		return ok && err == nil
	}
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '%':
			re.WriteString("(?s:.*)")
		case '_':
			re.WriteString("(?s:.)")
		case '\\':
			if i+1 < len(pattern) {
				i++
				re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			}
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(k)
}

// signedMax is max of a and b compared as int64, as a signed column would.
func signedMax(a, b uint64) uint64 {
	if int64(a) < int64(b) {
		return b
	}
	return a
}

// known reports whether k has a record or a tombstone; the caller holds
// mu.
func (s *simpleStore) known(k string) bool {
	_, ok := s.floors[k]
	return ok
}

// floor is the version of an ID without a record; the caller holds mu.
func (s *simpleStore) floor(k string) uint64 {
	if f, ok := s.floors[k]; ok {
		return f
	}
	return s.global
}

func copyRecord(r store.Record) store.Record {
	r.Data = slices.Clone(r.Data)
	return r
}

func (s *simpleStore) copyData(b []byte) []byte {
	if s.flaw == truncatesData && len(b) > 4<<20 {
		b = b[:4<<20]
	}
	return slices.Clone(b)
}

func (s *simpleStore) Load(ctx context.Context, id string) (store.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return store.Record{}, err
	}
	if id == "" {
		return store.Record{}, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(id)
	if s.flaw == staleCache {
		if r, ok := s.cache[k]; ok {
			return copyRecord(r), nil
		}
	}
	records := s.records
	if s.flaw == staleReplica {
		s.loads++
		if s.loads%2 == 0 {
			records = s.replica
		}
	}
	r, ok := records[k]
	if !ok {
		missing := store.Record{ID: id, Version: s.floor(k), Data: slices.Clone(s.tombs[k])}
		if s.flaw == tombstoneDataShared {
			missing.Data = s.tombs[k]
		}
		if _, ok := s.floors[k]; ok {
			if s.flaw != tombstoneForgetsAt {
				missing.At = s.tombAt[k]
			}
		} else {
			missing.At = s.lastAt
		}
		if s.flaw == missingWithoutID {
			missing.ID = ""
		}
		return missing, store.ErrNotFound
	}
	if s.flaw == staleCache {
		s.cache[k] = copyRecord(r)
	}
	r.ID = id
	return copyRecord(r), nil
}

// validate is Write's argument check.
func (s *simpleStore) validate(w store.Write) error {
	if s.flaw == expectedOverflows {
		if w.ID == "" {
			return store.ErrInvalid
		}
		return nil
	}
	return w.Validate()
}

// prepare builds what a valid w stores: the key, the record and the entry
// (nil without Effects), sharing no memory with w unless a flaw says so.
func (s *simpleStore) prepare(w store.Write) (string, store.Record, *store.Entry) {
	k := s.key(w.ID)
	rec := store.Record{ID: w.ID, Version: w.Expected + 1, Data: s.copyData(w.Data), Deadline: w.Deadline.Round(0)}
	switch s.flaw {
	case aliasesData:
		rec.Data = w.Data
	case appendsIntoCallerData:
		rec.Data = slices.Clone(append(w.Data, 0)[:len(w.Data)])
	case microsecondDeadlines:
		rec.Deadline = rec.Deadline.Truncate(time.Microsecond)
	case epochIsNone:
		if rec.Deadline.Equal(time.Unix(0, 0)) {
			rec.Deadline = time.Time{}
		}
	}
	var e *store.Entry
	if w.Effects != nil && !(s.flaw == emptyEffectsDropped && len(w.Effects) == 0) {
		data := slices.Clone(w.Effects)
		switch s.flaw {
		case truncatesEffects:
			data = data[:min(len(data), 4<<20)]
		case aliasesEffects:
			data = w.Effects
		}
		at := w.At.Round(0).UTC()
		if s.flaw == atMilliseconds {
			at = at.Truncate(time.Millisecond)
		}
		e = &store.Entry{Lobby: w.ID, Version: rec.Version, At: at, Data: data}
	}
	return k, rec, e
}

func (s *simpleStore) Write(ctx context.Context, w store.Write) error {
	if s.flaw != contextAfterWrite { // which looks only after committing, below
		if err := s.ctxErr(ctx); err != nil {
			return err
		}
	}
	if err := s.validate(w); err != nil {
		return err
	}
	if s.flaw == writeFailsNowAndThen && s.writes.Add(1)%writeFailEvery == 0 {
		return errInjected
	}
	k, rec, e := s.prepare(w)
	switch s.flaw {
	case lostUpdate:
		s.mu.Lock()
		ok := s.floor(k) == w.Expected
		s.mu.Unlock()
		if !ok {
			return store.ErrConflict
		}
		window()
		s.mu.Lock()
		s.commit(k, rec, e, w.Sessions)
		s.mu.Unlock()
		return nil

	case effectsBeforeRecord, recordBeforeEffects, tornWrite, dueSeparateStep, staleReplica, feedBeforeCommit,
		sessionIndexAfterRecord, sessionIndexBeforeRecord:
		s.wmu.Lock()
		defer s.wmu.Unlock()
		s.mu.Lock()
		if s.floor(k) != w.Expected {
			s.mu.Unlock()
			return store.ErrConflict
		}
		switch s.flaw {
		case effectsBeforeRecord:
			if e != nil {
				s.append(k, w.ID, *e)
			}
			e = nil
		case recordBeforeEffects:
			s.commit(k, rec, nil, w.Sessions)
		case sessionIndexAfterRecord:
			s.commit(k, rec, e, s.sessHeld[k])
		case sessionIndexBeforeRecord:
			s.reindex(k, w.ID, w.Sessions)
		case tornWrite:
			old, ok := s.records[k]
			if !ok {
				old = store.Record{ID: w.ID}
			}
			old.Version = rec.Version
			s.records[k] = old
			s.floors[k] = rec.Version
		case dueSeparateStep:
			old := s.index[k]
			s.commit(k, rec, e, w.Sessions)
			s.setIndex(k, old)
		case staleReplica:
			s.commit(k, rec, e, w.Sessions)
		case feedBeforeCommit:
			if e != nil {
				s.notify(store.Change{Lobby: w.ID, Version: e.Version})
			}
		}
		s.mu.Unlock()
		if s.flaw == feedBeforeCommit {
			time.Sleep(5 * time.Millisecond) // long enough for the reader to look too early
		} else {
			window()
		}
		s.mu.Lock()
		switch s.flaw {
		case recordBeforeEffects:
			if e != nil {
				s.append(k, w.ID, *e)
			}
		case dueSeparateStep:
			s.setIndex(k, store.Due{ID: rec.ID, Deadline: rec.Deadline})
		case staleReplica:
			s.replica[k] = copyRecord(rec)
		case sessionIndexAfterRecord:
			s.reindex(k, w.ID, w.Sessions)
		default:
			s.commit(k, rec, e, w.Sessions)
		}
		s.mu.Unlock()
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flaw == effectsOnConflict && e != nil {
		s.append(k, w.ID, *e)
		e = nil
	}
	_, exists := s.records[k]
	switch {
	case s.flaw == ignoresExpected:
		rec.Version = s.floor(k) + 1
		if e != nil {
			e.Version = rec.Version
		}
	case s.flaw == createOverwrites && w.Expected == 0 && exists:
	case s.flaw == createAtZero && w.Expected == 0 && !s.known(k):
	case s.floor(k) != w.Expected:
		return store.ErrConflict
	}
	s.commit(k, rec, e, w.Sessions)
	if s.flaw == contextAfterWrite {
		return ctx.Err()
	}
	return nil
}

// setIndex puts d in the due index under k, or takes k out for a zero
// deadline; the caller holds mu.
func (s *simpleStore) setIndex(k string, d store.Due) {
	if d.Deadline.IsZero() {
		delete(s.index, k)
	} else {
		s.index[k] = d
	}
}

// commit stores rec, appends e, if any, and indexes the lobby under the
// sessions sess; the caller holds mu.
func (s *simpleStore) commit(k string, rec store.Record, e *store.Entry, sess []string) {
	if s.flaw == dueKeepsCleared && rec.Deadline.IsZero() {
		rec.Deadline = s.records[k].Deadline
	}
	if old, ok := s.records[k]; ok && s.flaw == keepsStaleTail && len(rec.Data) < len(old.Data) {
		rec.Data = append(rec.Data, old.Data[len(rec.Data):]...)
	}
	_, existed := s.records[k]
	if l := s.logs[k]; l == nil {
		s.logs[k] = &simpleLog{id: rec.ID, trimmed: s.global}
		if s.flaw == freshForgetsFloor {
			s.logs[k].trimmed = 0
		}
	} else if !existed && s.flaw == recreateClearsLog {
		l.entries = nil
	} else if !existed && s.flaw == recreateForgetsTrim {
		l.trimmed = 0
	}
	delete(s.tombs, k)
	delete(s.tombAt, k)
	if s.flaw != staleKeepDeletes {
		delete(s.keeps, k)
	}
	s.records[k] = rec
	s.floors[k] = rec.Version
	s.setIndex(k, store.Due{ID: rec.ID, Deadline: rec.Deadline})
	if e != nil {
		s.append(k, rec.ID, *e)
	} else if s.flaw == changeForBareWrite {
		s.notify(store.Change{Lobby: rec.ID, Version: rec.Version})
	}
	if s.flaw != writeKeepsClaim {
		delete(s.claims, k)
	}
	if s.flaw != staleReplica {
		s.replica[k] = copyRecord(rec)
	}
	s.reindex(k, rec.ID, sess)
}

// append adds e to the log of k, trims it by count, tells the consumers
// and the feeds; the caller holds mu.
func (s *simpleStore) append(k, id string, e store.Entry) {
	l := s.logs[k]
	if l == nil {
		l = &simpleLog{id: id, trimmed: s.global}
		s.logs[k] = l
	}
	if s.flaw == positionIsCount {
		e.Version = l.trimmed + uint64(len(l.entries)) + 1
	}
	l.entries = append(l.entries, e)
	if n := s.ret.Entries; n > 0 && s.flaw != keepsEveryEntry && !(s.flaw == batchSkipsRetention && s.inBatch > 0) {
		if s.flaw == countKeepsOneMore {
			n++
		}
		if s.flaw == retentionStoreWide {
			s.trimStoreWide(n)
		} else {
			for len(l.entries) > n && !s.held(k, l.entries[0].Version) {
				s.trimFirst(k, l)
			}
		}
	}
	s.appends++
	for name, pending := range s.consumers {
		ck := s.ckey(name, k)
		if _, ok := s.cursors[ck]; !ok {
			if s.flaw == consumerStartsAtZero {
				s.cursors[ck] = 0
			} else {
				s.cursors[ck] = e.Version - 1
			}
		}
		if _, ok := pending[k]; !ok && e.Version > s.cursors[ck] {
			pending[k] = work{id: id, seq: s.appends}
		}
	}
	if s.flaw != feedBeforeCommit { // which added it before committing
		s.notify(store.Change{Lobby: id, Version: e.Version})
	}
}

// held reports whether consumersHoldEntries keeps position v of k: some
// consumer has not committed it. The caller holds mu.
func (s *simpleStore) held(k string, v uint64) bool {
	if s.flaw != consumersHoldEntries {
		return false
	}
	for name := range s.consumers {
		if c, ok := s.cursors[s.ckey(name, k)]; ok && c < v {
			return true
		}
	}
	return false
}

// trimFirst removes the oldest entry of l, folding a tombstone whose last
// entry it was; the caller holds mu.
func (s *simpleStore) trimFirst(k string, l *simpleLog) {
	if s.flaw == trimmedLowest {
		if l.trimmed == 0 || l.trimmed > l.entries[0].Version {
			l.trimmed = l.entries[0].Version
		}
	} else {
		l.trimmed = max(l.trimmed, l.entries[0].Version)
	}
	l.entries = slices.Delete(l.entries, 0, 1)
	if len(l.entries) == 0 {
		s.fold(k, nil)
	}
}

// trimStoreWide is count retention gone wrong: it keeps the newest n
// entries of the whole store.
func (s *simpleStore) trimStoreWide(n int) {
	total := 0
	for _, l := range s.logs {
		total += len(l.entries)
	}
	for ; total > n; total-- {
		var oldest string
		for k, l := range s.logs {
			if len(l.entries) > 0 && (oldest == "" || l.entries[0].At.Before(s.logs[oldest].entries[0].At)) {
				oldest = k
			}
		}
		s.trimFirst(oldest, s.logs[oldest])
	}
}

// fold drops the tombstone of k if k has neither a record nor entries nor
// a Keep after now (nil: Delete, which has no now), and raises the
// store-wide floor to its floor and At; the caller holds mu. It reports
// whether it dropped the tombstone.
func (s *simpleStore) fold(k string, now *time.Time) bool {
	if _, ok := s.records[k]; ok {
		if _, stale := s.keeps[k]; s.flaw != staleKeepDeletes || !stale {
			return false
		}
		delete(s.records, k)
		delete(s.index, k)
	}
	if l := s.logs[k]; (l != nil && len(l.entries) > 0 && s.flaw != keepDropsLog) || s.flaw == tombstoneOutlivesLog {
		return false
	}
	if keep, ok := s.keeps[k]; ok && s.flaw != keepIgnored && (now == nil || now.Before(keep)) {
		return false
	}
	f, at := s.floors[k], s.tombAt[k]
	delete(s.floors, k)
	delete(s.tombs, k)
	delete(s.tombAt, k)
	delete(s.keeps, k)
	delete(s.logs, k)
	switch s.flaw {
	case foldForgetsFloor:
	case foldLowersFloor:
		s.global = f
	case floorSigned:
		s.global = signedMax(s.global, f)
	default:
		s.global = max(s.global, f)
	}
	switch {
	case s.flaw == foldForgetsAt:
	case s.flaw == foldLowersAt:
		s.lastAt = at
	case at.After(s.lastAt):
		s.lastAt = at
	}
	return true
}

func (s *simpleStore) notify(c store.Change) {
	if s.flaw == feedSilent || s.silent > 0 {
		return
	}
	if s.flaw == changeWrongVersion {
		c.Version--
	}
	for i, f := range s.subs {
		if s.flaw == feedFirstOnly && i > 0 {
			break
		}
		if ch, ok := s.forward[f]; ok {
			select {
			case ch <- c:
			default: // dropped
			}
			continue
		}
		f.Add(c)
	}
}

func (s *simpleStore) Delete(ctx context.Context, d store.Deletion) error {
	id, expected, floor := d.ID, d.Expected, d.Floor
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if id == "" {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(id)
	r, ok := s.records[k]
	if !ok {
		if s.flaw == deleteMissingSetsFloor {
			s.floors[k] = max(s.floor(k), floor)
		}
		return store.ErrNotFound
	}
	if r.Version != expected && s.flaw != deleteIgnoresVersion {
		return store.ErrConflict
	}
	delete(s.records, k)
	delete(s.replica, k)
	delete(s.claims, k)
	if s.flaw != sessionDeleteKeepsIndex {
		s.reindex(k, id, nil)
	}
	if s.flaw != deleteKeepsDeadline {
		delete(s.index, k)
	}
	s.floors[k] = max(r.Version, floor)
	if s.flaw == floorSigned {
		s.floors[k] = signedMax(r.Version, floor)
	}
	// Times as a store keeps them: an instant in UTC.
	s.tombAt[k] = d.At.UTC().Round(0)
	if !d.Keep.IsZero() {
		s.keeps[k] = d.Keep
	}
	if s.flaw != tombstoneDropsData {
		s.tombs[k] = slices.Clone(r.Data)
	}
	switch s.flaw {
	case forgetsFloor:
		s.floors[k] = 0
	case floorIgnoresExpected:
		s.floors[k] = floor
	case deleteDropsLog:
		s.logs[k].entries = nil
	}
	s.fold(k, nil)
	if s.flaw == deleteGlob || s.flaw == deleteLike {
		for k2 := range s.records {
			if k2 != k && s.patternMatches(id, k2) {
				delete(s.records, k2)
				delete(s.index, k2)
			}
		}
	}
	return nil
}

func (s *simpleStore) due(now time.Time, limit int, skipClaimed bool) []store.Due {
	var out []store.Due
	for k, d := range s.index {
		if d.Deadline.After(now) {
			continue
		}
		if s.flaw == dueExclusive && d.Deadline.Equal(now) {
			continue
		}
		until, ok := s.claims[k]
		held := ok && now.Before(until)
		if s.flaw == claimsByWallClock {
			held = ok && time.Now().Before(until)
		}
		if skipClaimed && held {
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b store.Due) int {
		switch s.flaw {
		case dueByID:
			return strings.Compare(a.ID, b.ID)
		case dueTiesUnsorted:
			// Break ties by the length of the ID: deterministic, and
			// wrong whenever byte order says otherwise.
			return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(len(a.ID), len(b.ID)))
		}
		return cmp.Or(a.Deadline.Compare(b.Deadline), strings.Compare(a.ID, b.ID))
	})
	if s.flaw == dueCapped {
		limit = min(limit, 4096)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (s *simpleStore) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.due(now, limit, false)
	if s.flaw == duePops {
		for _, d := range out {
			delete(s.index, s.key(d.ID))
		}
	}
	return out, nil
}

func (s *simpleStore) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || hold < 0 || (hold == 0 && s.flaw != claimZeroHold) {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.due(now, limit, s.flaw != claimsNotHeld)
	for _, d := range out {
		if s.flaw == claimsByWallClock {
			s.claims[s.key(d.ID)] = time.Now().Add(hold)
		} else {
			s.claims[s.key(d.ID)] = now.Add(hold)
		}
	}
	if s.flaw == claimReversed {
		slices.Reverse(out)
	}
	return out, nil
}

func (s *simpleStore) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	if err := s.logCtxErr(ctx); err != nil {
		return nil, err
	}
	if id == "" || limit < 0 || (limit == 0 && s.flaw != readLogZeroLimit) {
		return nil, store.ErrInvalid
	}
	if limit == 0 {
		limit = 1 << 30
	}
	if s.flaw == readLogCapped {
		limit = min(limit, 100)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(id)
	l := s.logs[k]
	if l == nil {
		if after < s.global && s.flaw != compactionUnreported {
			return nil, &store.CompactedError{Lobby: id, After: after, Trimmed: s.global}
		}
		return nil, nil
	}
	if after < l.trimmed && s.flaw != compactionUnreported {
		return nil, &store.CompactedError{Lobby: id, After: after, Trimmed: l.trimmed}
	}
	var picked []int
	for i, e := range l.entries {
		if e.Version > after || (s.flaw == readLogInclusive && e.Version == after) {
			picked = append(picked, i)
		}
	}
	if s.flaw == readLogNewestFirst {
		slices.Reverse(picked)
	}
	picked = picked[:min(len(picked), limit)]
	out := make([]store.Entry, len(picked))
	for i, at := range picked {
		out[i] = l.entries[at]
		if s.flaw != readLogAliases {
			out[i].Data = slices.Clone(out[i].Data)
		}
	}
	if s.flaw == readLogSharesBuffer {
		var buf []byte
		for _, e := range out {
			buf = append(buf, e.Data...)
		}
		at := 0
		for i := range out {
			n := len(out[i].Data)
			out[i].Data = buf[at : at+n]
			at += n
		}
	}
	if s.flaw == readLogDrains && len(picked) > 0 {
		l.entries = slices.DeleteFunc(l.entries, func(e store.Entry) bool { return e.Version > after })
	}
	return out, nil
}

func (s *simpleStore) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	if err := s.logCtxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flaw == headsSortsIDs {
		slices.Sort(ids)
	}
	ask := ids
	if s.flaw == headsSorted {
		ask = slices.Clone(ids)
		slices.Sort(ask)
	}
	out := make([]uint64, len(ask))
	for i, id := range ask {
		k := s.key(id)
		if s.flaw == headIsVersion {
			if r, ok := s.records[k]; ok {
				out[i] = r.Version
				continue
			}
		}
		if l := s.logs[k]; l != nil && len(l.entries) > 0 {
			out[i] = l.entries[len(l.entries)-1].Version
		}
	}
	return out, nil
}

func (s *simpleStore) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := s.logCtxErr(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flaw == trimByWallClock {
		now = time.Now()
	}
	n := 0
	if s.ret.Age > 0 {
		n = s.trimAged(now, limit)
	}
	if s.flaw == trimCountsLimit {
		return limit, nil
	}
	if s.ret.Age <= 0 && s.flaw == keepNeedsAge {
		return n, nil
	}
	// Tombstones whose Keep has come, earliest Keep first.
	var due []string
	for k, keep := range s.keeps {
		if !now.Before(keep) {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int { return cmp.Or(s.keeps[a].Compare(s.keeps[b]), strings.Compare(a, b)) })
	for _, k := range due {
		if n >= limit {
			break
		}
		if l := s.logs[k]; l != nil && len(l.entries) > 0 && s.flaw != keepDropsLog {
			continue // it goes with its last entry
		}
		if s.fold(k, &now) && s.flaw != keepUncounted {
			n++
		}
	}
	return n, nil
}

// trimAged removes up to limit entries older than the Age bound; the
// caller holds mu.
func (s *simpleStore) trimAged(now time.Time, limit int) int {
	cutoff := now.Add(-s.ret.Age)
	type old struct {
		k string
		e store.Entry
	}
	var all []old
	for k, l := range s.logs {
		// An entry is as old as the latest At of it and of the entries
		// before it: what goes is always a prefix of the log.
		var key time.Time
		last := -1 // ageTakesEarlier: the last entry that is old by itself
		for i, e := range l.entries {
			if i == 0 || e.At.After(key) {
				key = e.At
			}
			switch {
			case s.flaw == ageByOwnAt:
				if e.At.Before(cutoff) {
					all = append(all, old{k, e})
				}
			case s.flaw == ageTakesEarlier:
				if e.At.Before(cutoff) {
					last = i
				}
			case key.Before(cutoff):
				e.At = key // the sort below orders by age
				all = append(all, old{k, e})
			}
		}
		for i := 0; i <= last; i++ {
			all = append(all, old{k, l.entries[i]})
		}
	}
	slices.SortFunc(all, func(a, b old) int {
		return cmp.Or(a.e.At.Compare(b.e.At), strings.Compare(a.k, b.k), cmp.Compare(a.e.Version, b.e.Version))
	})
	if s.flaw == trimNewestFirst {
		slices.Reverse(all)
	}
	if s.flaw != trimIgnoresLimit {
		all = all[:min(len(all), limit)]
	}
	for _, o := range all {
		l := s.logs[o.k]
		i := slices.IndexFunc(l.entries, func(e store.Entry) bool { return e.Version == o.e.Version })
		l.trimmed = max(l.trimmed, o.e.Version)
		l.entries = slices.Delete(l.entries, i, i+1)
		if len(l.entries) == 0 {
			foldAt := &now
			if s.flaw == keepLostWithLog {
				foldAt = &later
			}
			s.fold(o.k, foldAt)
		}
	}
	return len(all)
}

// later is a now after every Keep the suite uses.
var later = time.Date(9999, time.January, 1, 0, 0, 0, 0, time.UTC)

func (s *simpleStore) RegisterConsumer(ctx context.Context, name string) error {
	if err := s.logCtxErr(ctx); err != nil {
		return err
	}
	if name == "" {
		return store.ErrInvalid
	}
	if s.flaw == registersLate {
		go func() {
			time.Sleep(time.Millisecond)
			s.mu.Lock()
			defer s.mu.Unlock()
			s.register(name)
		}()
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.register(name)
	return nil
}

// register registers name; the caller holds mu.
func (s *simpleStore) register(name string) {
	if _, ok := s.consumers[name]; !ok {
		s.consumers[name] = map[string]work{}
	}
}

func (s *simpleStore) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	if err := s.logCtxErr(ctx); err != nil {
		return nil, err
	}
	if name == "" || limit <= 0 || hold < 0 || (hold == 0 && s.flaw != logClaimZeroHold) {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	s.register(name)
	type item struct {
		k string
		w work
	}
	var found []item
	for k, w := range s.consumers[name] {
		until, ok := s.logClaims[s.ckey(name, k)]
		if ok && now.Before(until) && s.flaw != logClaimsNotHeld {
			continue
		}
		if l := s.logs[k]; s.flaw == claimSkipsCompacted && (l == nil || len(l.entries) == 0 || l.entries[len(l.entries)-1].Version <= s.cursors[s.ckey(name, k)]) {
			continue
		}
		found = append(found, item{k, w})
	}
	slices.SortFunc(found, func(a, b item) int { return cmp.Compare(a.w.seq, b.w.seq) })
	if s.flaw != logClaimIgnoresLimit {
		found = found[:min(len(found), limit)]
	}
	out := make([]store.Cursor, len(found))
	for i, it := range found {
		out[i] = store.Cursor{Lobby: it.w.id, After: s.cursors[s.ckey(name, it.k)]}
	}
	if s.flaw == logClaimSplit {
		s.mu.Unlock()
		window()
		s.mu.Lock()
	}
	for _, it := range found {
		s.logClaims[s.ckey(name, it.k)] = now.Add(hold)
	}
	s.mu.Unlock()
	return out, nil
}

func (s *simpleStore) CommitLog(ctx context.Context, name, id string, after uint64) error {
	if err := s.logCtxErr(ctx); err != nil {
		return err
	}
	if name == "" || id == "" {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.consumers[name]; !ok {
		if s.flaw != commitRegisters {
			return store.ErrInvalid
		}
		s.register(name)
	}
	k := s.key(id)
	ck := s.ckey(name, k)
	if _, ok := s.cursors[ck]; !ok && s.flaw != commitMakesCursor {
		return nil // no cursor: nothing of this lobby was ever due to name
	}
	if s.flaw == commitAppliedLate {
		delete(s.logClaims, ck)
		go func() {
			window()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.applyCommit(name, k, ck, after)
		}()
		return nil
	}
	s.applyCommit(name, k, ck, after)
	return nil
}

// applyCommit is CommitLog's change; the caller holds mu.
func (s *simpleStore) applyCommit(name, k, ck string, after uint64) {
	pending := s.consumers[name]
	if s.flaw == commitMovesBack {
		s.cursors[ck] = after
	} else {
		s.cursors[ck] = max(s.cursors[ck], after)
	}
	delete(s.logClaims, ck)
	head := uint64(0)
	if l := s.logs[k]; l != nil && len(l.entries) > 0 {
		head = l.entries[len(l.entries)-1].Version
	}
	if head <= s.cursors[ck] || s.flaw == commitLosesWrite {
		delete(pending, k)
	}
}

func (s *simpleStore) Subscribe(ctx context.Context) (*store.Feed, error) {
	if err := s.logCtxErr(ctx); err != nil {
		return nil, err
	}
	f := store.NewFeed(0)
	s.mu.Lock()
	s.subs = append(s.subs, f)
	if s.flaw == feedDropsUnderLoad {
		ch := make(chan store.Change, 1)
		if s.forward == nil {
			s.forward = map[*store.Feed]chan store.Change{}
		}
		s.forward[f] = ch
		go func() {
			for {
				select {
				case c := <-ch:
					window() // delivery takes a moment, as through a server
					f.Add(c)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.subs = slices.DeleteFunc(s.subs, func(o *store.Feed) bool { return o == f })
	})
	return f, nil
}

// WriteBatch applies each write as Write does, one after another in the
// order given, after looking at the context once. With a batch flaw it
// breaks one rule of store.BatchWriter.
// batchEntriesLate is WriteBatch committing every record first and
// appending the entries after a window.
func (s *simpleStore) batchEntriesLate(ctx context.Context, ws []store.Write) []error {
	errs := make([]error, len(ws))
	type late struct {
		k string
		e store.Entry
	}
	var entries []late
	for i, w := range ws {
		effects := w.Effects
		w.Effects = nil
		if errs[i] = s.Write(ctx, w); errs[i] == nil && effects != nil {
			entries = append(entries, late{s.key(w.ID), store.Entry{Lobby: w.ID, Version: w.Expected + 1, At: w.At.UTC().Round(0), Data: slices.Clone(effects)}})
		}
	}
	window()
	time.Sleep(200 * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range entries {
		s.append(l.k, l.e.Lobby, l.e)
	}
	return errs
}

func (s *simpleStore) WriteBatch(ctx context.Context, ws []store.Write) []error {
	if s.flaw == batchEmptyInvalid && len(ws) == 0 {
		return []error{store.ErrInvalid}
	}
	errs := make([]error, len(ws))
	if s.flaw != batchPartialOnCancel { // which looks between chunks, below
		if err := s.ctxErr(ctx); err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	}
	switch s.flaw {
	case batchConflictFailsAll, batchInvalidFailsAll:
		if err := s.batchRefused(ws); err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	case batchCheckThenSet:
		return s.batchCheckThenSet(ws)
	case batchNoChange:
		s.mu.Lock()
		s.silent++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.silent--
			s.mu.Unlock()
		}()
	case batchSkipsRetention:
		s.mu.Lock()
		s.inBatch++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inBatch--
			s.mu.Unlock()
		}()
	case batchEntriesLate:
		return s.batchEntriesLate(ctx, ws)
	}
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	if s.flaw == batchReordered {
		slices.Reverse(order)
	}
	for _, i := range order {
		w := ws[i]
		switch s.flaw {
		case batchPartialOnCancel:
			if i >= 8 && i%8 == 0 && ctx.Err() != nil {
				for j := i; j < len(ws); j++ {
					errs[j] = ctx.Err()
				}
				return errs
			}
			errs[i] = s.Write(context.WithoutCancel(ctx), w)
			continue
		case batchCapped:
			if i >= 256 {
				continue // reported as committed, never sent
			}
		case batchSkipsLog:
			w.Effects = nil
		case batchSkipsSessions:
			w.Sessions = nil
		case batchSkipsDue:
			errs[i] = s.writeKeepingIndex(ctx, w)
			continue
		}
		var claim time.Time
		var claimed bool
		if s.flaw == batchKeepsClaim {
			s.mu.Lock()
			claim, claimed = s.claims[s.key(w.ID)]
			s.mu.Unlock()
		}
		errs[i] = s.Write(ctx, w)
		if errs[i] == nil && (s.flaw == batchAliasesData || s.flaw == batchAliasesEffects) {
			s.alias(w)
		}
		if errs[i] == nil && claimed {
			s.mu.Lock()
			s.claims[s.key(w.ID)] = claim
			s.mu.Unlock()
		}
	}
	switch s.flaw {
	case batchReversed:
		slices.Reverse(errs)
	case batchShortResult:
		for len(errs) > 0 && errs[len(errs)-1] == nil {
			errs = errs[:len(errs)-1]
		}
	}
	return errs
}

// batchRefused is the error that makes batchConflictFailsAll or
// batchInvalidFailsAll refuse the whole of ws, or nil if no write of ws
// would be refused for that reason.
func (s *simpleStore) batchRefused(ws []store.Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	versions := map[string]uint64{}
	for _, w := range ws {
		if err := s.validate(w); err != nil {
			if s.flaw == batchInvalidFailsAll {
				return err
			}
			continue
		}
		k := s.key(w.ID)
		v, ok := versions[k]
		if !ok {
			v = s.floor(k)
		}
		if v != w.Expected {
			if s.flaw == batchConflictFailsAll {
				return store.ErrConflict
			}
			continue
		}
		versions[k] = v + 1
	}
	return nil
}

// batchCheckThenSet is WriteBatch for batchCheckThenSet: every version is
// checked under the lock, and the writes that passed are committed after
// a window, without looking again.
func (s *simpleStore) batchCheckThenSet(ws []store.Write) []error {
	type pass struct {
		k    string
		rec  store.Record
		e    *store.Entry
		sess []string
	}
	errs := make([]error, len(ws))
	var passed []pass
	s.mu.Lock()
	versions := map[string]uint64{}
	for i, w := range ws {
		if errs[i] = s.validate(w); errs[i] != nil {
			continue
		}
		k, rec, e := s.prepare(w)
		v, ok := versions[k]
		if !ok {
			v = s.floor(k)
		}
		if v != w.Expected {
			errs[i] = store.ErrConflict
			continue
		}
		versions[k] = v + 1
		passed = append(passed, pass{k, rec, e, w.Sessions})
	}
	s.mu.Unlock()
	window()
	s.mu.Lock()
	for _, p := range passed {
		s.commit(p.k, p.rec, p.e, p.sess)
	}
	s.mu.Unlock()
	return errs
}

// writeKeepingIndex is Write for batchSkipsDue: the due index keeps what
// it had for the lobby.
func (s *simpleStore) writeKeepingIndex(ctx context.Context, w store.Write) error {
	k := s.key(w.ID)
	s.mu.Lock()
	old, had := s.index[k]
	s.mu.Unlock()
	if err := s.Write(ctx, w); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if had {
		s.index[k] = old
	} else {
		delete(s.index, k)
	}
	return nil
}

// alias makes the record (batchAliasesData) or the newest entry
// (batchAliasesEffects) just written from w hold w's own slice.
func (s *simpleStore) alias(w store.Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(w.ID)
	if s.flaw == batchAliasesData {
		rec := s.records[k]
		rec.Data = w.Data
		s.records[k] = rec
		return
	}
	if l := s.logs[k]; w.Effects != nil && l != nil && len(l.entries) > 0 {
		l.entries[len(l.entries)-1].Data = w.Effects
	}
}

func (f flaw) String() string { return fmt.Sprintf("%s (caught by %s)", f.name, f.check) }
