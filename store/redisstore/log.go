package redisstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// A lobby's effects log is a stream of its own, {P:k}:l:L, whose entry IDs
// are "<position>-0": stream IDs are pairs of uint64, so every position a
// Write can create is an ID, and XADD with an explicit ID refuses one that
// is not above the last, which positions never are. XRANGE reads from a
// position on; XREVRANGE finds the head.
//
// Retention works from both ends. The write script trims a log to the
// retained count as it appends. For age, every entry also has a member in
// its shard's age index, {P:k}:age, whose byte order is (entry time,
// position, lobby), and TrimLog walks that index from its start, so it
// touches only entries it removes. Whatever is trimmed, the record hash (or
// tombstone) keeps the highest position trimmed in its field x, which is
// how ReadLog tells a reader that asks for something older. When a
// tombstone's log runs empty the tombstone goes, and its floor is folded
// into the shard's floor, which answers for every ID of the shard that has
// no hash.

// ReadLog returns up to limit entries of the lobby's log after position
// after, in position order; nil if there are none. If retention removed an
// entry the reader asked for, it returns a *store.CompactedError whose
// Trimmed is the lobby's trim marker (or, for an ID without record or
// tombstone, the shard floor). Each entry's Data is a new slice the caller
// owns and its At is in UTC. An empty ID or a limit below 1 is
// store.ErrInvalid. It is one read-only script.
func (s *Store) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errEmptyID
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: read log of %q with limit %d", store.ErrInvalid, id, limit)
	}
	sh := s.shardOf(id)
	// Every position is at most the largest uint64, so after it there is
	// nothing; the script still judges compaction. XRANGE from "+" finds
	// only an entry whose ID is the largest stream ID, which no log has
	// (their IDs end in -0).
	start := "+"
	if after < math.MaxUint64 {
		start = strconv.FormatUint(after+1, 10)
	}
	args := []string{strconv.FormatUint(after, 10), start, strconv.Itoa(limit)}
	res, err := s.readLog.exec(ctx, s.c, []string{sh.rec + id, sh.log + id, sh.floor}, args).ToArray()
	if err != nil {
		return nil, fmt.Errorf("redisstore: read log of %q: %w", id, err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("%w: read log of %q: %d values", ErrCorrupt, id, len(res))
	}
	kind, _ := res[0].ToString()
	if kind == "c" {
		t, _ := res[1].ToString()
		trimmed, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: lobby %q has trim marker %q", ErrCorrupt, id, t)
		}
		return nil, fmt.Errorf("redisstore: %w", &store.CompactedError{Lobby: id, After: after, Trimmed: trimmed})
	}
	xs, err := res[1].AsXRange()
	if err != nil {
		return nil, fmt.Errorf("%w: read log of %q: %v", ErrCorrupt, id, err)
	}
	if len(xs) == 0 {
		return nil, nil
	}
	out := make([]store.Entry, len(xs))
	for i, x := range xs {
		e, err := toEntry(id, x)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// toEntry converts a log stream entry.
func toEntry(id string, x rueidis.XRangeEntry) (store.Entry, error) {
	pos, ok := parsePosition(x.ID)
	at, okAt := parseDeadlineKey(x.FieldValues["a"])
	d, okD := x.FieldValues["d"]
	if !ok || !okAt || !okD {
		return store.Entry{}, fmt.Errorf("%w: log entry %s of lobby %q", ErrCorrupt, x.ID, id)
	}
	// A new slice, also for an empty entry: the entry exists, and a
	// non-nil Data says so.
	data := make([]byte, len(d))
	copy(data, d)
	return store.Entry{Lobby: id, Version: pos, At: at, Data: data}, nil
}

// parsePosition reads a log stream entry ID, "<position>-0".
func parsePosition(sid string) (uint64, bool) {
	p, ok := strings.CutSuffix(sid, "-0")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(p, 10, 64)
	return n, err == nil && n > 0
}

// LogHeads returns the position of the newest kept entry of each lobby's
// log (0 for none), in the order of ids, in one pipelined round trip of
// read-only scripts (which return the position only, never the entry). An
// empty ID is store.ErrInvalid; no IDs gives nil.
func (s *Store) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	multi := make([]rueidis.LuaExec, len(ids))
	for i, id := range ids {
		if id == "" {
			return nil, errEmptyID
		}
		multi[i] = rueidis.LuaExec{Keys: []string{s.shardOf(id).log + id}}
	}
	out := make([]uint64, len(ids))
	for i, r := range s.head.execMulti(ctx, s.c, multi) {
		v, err := r.ToString()
		if err != nil {
			return nil, fmt.Errorf("redisstore: log heads: %w", err)
		}
		if out[i], err = strconv.ParseUint(v, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: head of the log of %q is %q", ErrCorrupt, ids[i], v)
		}
	}
	return out, nil
}

// TrimLog removes up to limit log entries whose time is before now minus
// the retention Age, oldest first over all shards, and then the tombstones
// whose Deletion.Keep is at or before now and whose log is empty, earliest
// Keep first; it returns how many entries and tombstones it removed, at most
// limit. It looks at Keep times also without an Age bound. An entry goes
// together with the earlier entries of its lobby (a log stays one run of
// positions), which count against limit too. A tombstone whose last entry
// goes is removed unless its Keep is after now; a tombstone whose Keep came
// while it still has entries forgets its Keep (not counted) and goes with
// its last entry. Removed tombstones fold their floor and At into the shard
// floor, and then into every other shard's. A limit below 1 is
// store.ErrInvalid.
//
// With one shard it is one script. With several, it first reads the
// oldest limit members of every shard's age index, keeps the oldest limit
// overall, and then trims up to those in one script per shard, pipelined;
// if that removed fewer than limit, it looks again, until a look finds
// nothing to remove; the keep index goes the same way after. Either way it
// reads only what it removes, plus at most limit index members per shard
// and look.
func (s *Store) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("redisstore: %w: trim log with limit %d", store.ErrInvalid, limit)
	}
	var bound string
	if s.retention.Age > 0 {
		bound = "(" + deadlineKey(now.Add(-s.retention.Age))
	}
	nowKey, keepBound := deadlineKey(now), "+"
	if k, ok := afterKey(now); ok {
		keepBound = "(" + k
	}
	if len(s.shards) == 1 {
		sh := &s.shards[0]
		args := []string{"scan", bound, strconv.Itoa(limit), sh.tag, nowKey, keepBound}
		n, _, _, err := trimResult(s.trim.exec(ctx, s.c, s.trimKeys(sh), args))
		if err != nil {
			return 0, fmt.Errorf("redisstore: trim log: %w", err)
		}
		return n, nil
	}

	// Each round looks at every shard and trims up to the oldest picks. A
	// round can fall short of its picks: an earlier entry of a pick's
	// lobby used the budget, or another TrimLog took a pick. Then the next
	// round looks again, as long as rounds make progress.
	total := 0
	for bound != "" && total < limit {
		n, err := s.trimRound(ctx, s.shardAge, "ids", bound, nowKey, keepBound, limit-total)
		if n <= 0 {
			if err != nil {
				return total, err
			}
			break
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	// A round over the keep indexes removes every member it picked, also
	// those it does not count (a Keep that came while the log had
	// entries, or one left by a lobby written since), so rounds go on
	// until a look finds no member at all.
	for total < limit {
		n, err := s.trimRound(ctx, s.shardKeep, "keepids", keepBound, nowKey, keepBound, limit-total)
		if n < 0 {
			break
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// trimKeys are the keys of the trim script for shard sh.
func (s *Store) trimKeys(sh *shard) []string {
	return []string{sh.age, sh.floor, sh.names, sh.floorAt, sh.keep}
}

func (s *Store) shardAge(k int) string  { return s.shards[k].age }
func (s *Store) shardKeep(k int) string { return s.shards[k].keep }

// trimRound is one round of TrimLog with several shards: it reads the
// first limit members up to bound of every shard's index (index(k): the
// age or the keep index), keeps the first limit overall, and runs the trim
// script in mode on them, one script per shard, pipelined. It returns how
// many entries and tombstones it removed, or -1 if it found no member.
func (s *Store) trimRound(ctx context.Context, index func(int) string, mode, bound, nowKey, keepBound string, limit int) (int, error) {
	cmds := make(rueidis.Commands, len(s.shards))
	for k := range s.shards {
		cmds[k] = s.c.B().Zrangebylex().Key(index(k)).Min("-").Max(bound).Limit(0, int64(limit)).Build()
	}
	type pick struct {
		member string
		shard  int
	}
	var picks []pick
	for k, r := range s.c.DoMulti(ctx, cmds...) {
		ms, err := r.AsStrSlice()
		if err != nil {
			return 0, fmt.Errorf("redisstore: trim log: %w", err)
		}
		for _, m := range ms {
			ok := len(m) > deadlineKeyLen
			if mode == "ids" {
				_, _, ok = parseAgeMember(m)
			}
			if !ok {
				return 0, fmt.Errorf("%w: %s member %q", ErrCorrupt, index(k), m)
			}
			picks = append(picks, pick{m, k})
		}
	}
	if len(picks) == 0 {
		return -1, nil
	}
	// Members are ordered by their leading key (time, then for the age
	// index the position); ties go by ID.
	slices.SortFunc(picks, func(a, b pick) int { return strings.Compare(a.member, b.member) })
	picks = picks[:min(len(picks), limit)]
	byShard := make(map[int][]string)
	var order []int
	for _, p := range picks {
		if _, ok := byShard[p.shard]; !ok {
			order = append(order, p.shard)
		}
		byShard[p.shard] = append(byShard[p.shard], p.member)
	}
	multi := make([]rueidis.LuaExec, 0, len(order))
	for _, k := range order {
		ms := byShard[k]
		age := ""
		if mode == "ids" {
			age = bound
		}
		a := append([]string{mode, age, strconv.Itoa(len(ms)), s.shards[k].tag, nowKey, keepBound}, ms...)
		multi = append(multi, rueidis.LuaExec{Keys: s.trimKeys(&s.shards[k]), Args: a})
	}
	total := 0
	var folded uint64
	var foldedAt string
	for _, r := range s.trim.execMulti(ctx, s.c, multi) {
		n, f, at, err := trimResult(r)
		if err != nil {
			return total, fmt.Errorf("redisstore: trim log: %w", err)
		}
		total += n
		folded = max(folded, f)
		foldedAt = max(foldedAt, at)
	}
	if folded > 0 || foldedAt != "" {
		if err := s.raiseFloors(ctx, folded, foldedAt, -1); err != nil {
			return total, fmt.Errorf("redisstore: trim log: %w", err)
		}
	}
	return total, nil
}

// trimResult reads the trim script's reply: entries and tombstones
// removed, the highest floor folded (0 for none) and the latest At key
// folded ("" for none).
func trimResult(r rueidis.RedisResult) (int, uint64, string, error) {
	vals, err := r.ToArray()
	if err != nil {
		return 0, 0, "", err
	}
	if len(vals) != 3 {
		return 0, 0, "", fmt.Errorf("%w: trim reply of %d values", ErrCorrupt, len(vals))
	}
	n, err1 := vals[0].AsInt64()
	f, err2 := vals[1].ToString()
	folded, err3 := strconv.ParseUint(f, 10, 64)
	at, err4 := vals[2].ToString()
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return 0, 0, "", fmt.Errorf("%w: trim reply %v", ErrCorrupt, vals)
	}
	return int(n), folded, at, nil
}

// raiseFloors copies a floor and At key folded in shard k into every other
// shard's floor and floor time (every shard's, if k is -1), in one
// pipelined round trip. The floor and time that keep an ID's versions from
// repeating and its clock from going back are its own shard's, which the
// folding script raised atomically; this makes every shard report the
// store-wide floor and time, as Load must for IDs without a record or
// tombstone. Until it is done (or if it fails) other shards report a lower
// floor or an earlier time for a moment: that repeats no version and turns
// no clock back, since the folded lobby lives in shard k only.
func (s *Store) raiseFloors(ctx context.Context, floor uint64, at string, k int) error {
	if len(s.shards) == 1 {
		return nil
	}
	f := strconv.FormatUint(floor, 10)
	multi := make([]rueidis.LuaExec, 0, len(s.shards)-1)
	for j := range s.shards {
		if j != k {
			multi = append(multi, rueidis.LuaExec{Keys: []string{s.shards[j].floor, s.shards[j].floorAt}, Args: []string{f, at}})
		}
	}
	for _, r := range s.raiseFloor.execMulti(ctx, s.c, multi) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("raising the floors of other shards to %s: %w", f, err)
		}
	}
	return nil
}
