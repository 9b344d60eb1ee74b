package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// The outbox of a shard is a stream: XADD in the write script gives each
// event an entry ID that grows with every append, so XRANGE reads the
// shard's events in commit order. With several shards the IDs are the commit
// time in microseconds, then a counter, and the shards merge by entry ID. A hash beside it maps each event's
// (seq, lobby) to its entry IDs, which is how Ack finds what to XDEL.

// ackBatch bounds the events one Ack script handles, so that a huge Ack does
// not hold the server for long.
const ackBatch = 512

// entryID is a parsed stream entry ID, for ordering entries across shards.
type entryID struct {
	ms, seq uint64
}

func parseEntryID(s string) (entryID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return entryID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return entryID{ms, seq}, err1 == nil && err2 == nil
}

// Pending returns up to limit unacknowledged events, oldest commit first,
// the events of one write in the order they were given; an empty outbox
// gives nil. Each event's Data is a new slice the caller owns (nil when
// empty). A limit below 1 is store.ErrInvalid. Events stay pending until
// acknowledged. With several shards, events of different shards are merged
// by the time their commit read from the server's clock, in microseconds
// (see the package documentation).
func (s *Store) Pending(ctx context.Context, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: limit %d", store.ErrInvalid, limit)
	}
	cmds := make(rueidis.Commands, len(s.shards))
	for k := range s.shards {
		cmds[k] = s.c.B().Xrange().Key(s.shards[k].out).Start("-").End("+").Count(int64(limit)).Build()
	}
	type entry struct {
		id    entryID
		shard int
		ev    store.Event
	}
	var entries []entry
	for k, r := range s.c.DoMulti(ctx, cmds...) {
		xs, err := r.AsXRange()
		if err != nil {
			return nil, fmt.Errorf("redisstore: pending: %w", err)
		}
		for _, x := range xs {
			id, ok := parseEntryID(x.ID)
			lobby, okL := x.FieldValues["l"]
			seq, err := strconv.ParseUint(x.FieldValues["s"], 10, 64)
			if !ok || !okL || err != nil {
				return nil, fmt.Errorf("%w: outbox entry %s", ErrCorrupt, x.ID)
			}
			ev := store.Event{Lobby: lobby, Seq: seq}
			if d := x.FieldValues["d"]; d != "" {
				ev.Data = []byte(d)
			}
			entries = append(entries, entry{id, k, ev})
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	if len(s.shards) > 1 {
		slices.SortStableFunc(entries, func(a, b entry) int {
			if c := cmp.Compare(a.id.ms, b.id.ms); c != 0 {
				return c
			}
			if c := cmp.Compare(a.id.seq, b.id.seq); c != 0 {
				return c
			}
			return cmp.Compare(a.shard, b.shard)
		})
		entries = entries[:min(len(entries), limit)]
	}
	out := make([]store.Event, len(entries))
	for i := range entries {
		out[i] = entries[i].ev
	}
	return out, nil
}

// Ack removes the events named by (Lobby, Seq) from the outbox; Data is
// ignored, and unknown or already acknowledged events are skipped. The
// caller keeps events. Ack is atomic per shard and per batch of 512 events,
// not as a whole: if it fails midway, some events may be acknowledged, and
// acknowledging them again is harmless.
func (s *Store) Ack(ctx context.Context, events []store.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	fields := make([][]string, len(s.shards))
	for i := range events {
		k := shardIndex(events[i].Lobby, len(s.shards))
		fields[k] = append(fields[k], eventField(events[i].Lobby, events[i].Seq))
	}
	var multi []rueidis.LuaExec
	for k, fs := range fields {
		for len(fs) > 0 {
			n := min(len(fs), ackBatch)
			multi = append(multi, rueidis.LuaExec{Keys: []string{s.shards[k].out, s.shards[k].ix}, Args: fs[:n]})
			fs = fs[n:]
		}
	}
	var res []rueidis.RedisResult
	if len(multi) == 1 {
		res = []rueidis.RedisResult{s.ack.exec(ctx, s.c, multi[0].Keys, multi[0].Args)}
	} else {
		res = s.ack.execMulti(ctx, s.c, multi)
	}
	for _, r := range res {
		if err := r.Error(); err != nil {
			return fmt.Errorf("redisstore: ack: %w", err)
		}
	}
	return nil
}
