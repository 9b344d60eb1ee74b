package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// The due index of a shard is a sorted set whose members all have score 0
// and read deadlineKey(deadline)+ID. Redis orders equal-score members by
// their bytes, so ZRANGEBYLEX walks them in (deadline, ID) order exactly; a
// float score could not, since float64 holds Unix nanoseconds only to about
// a quarter of a microsecond today. Members of all shards merge by the same
// byte order.

// upperBound returns the ZRANGEBYLEX max that admits exactly the members
// whose deadline is at or before now.
func upperBound(now time.Time) string {
	if k, ok := afterKey(now); ok {
		return "(" + k
	}
	return "+"
}

// toDue turns sorted due members into store.Due values.
func toDue(members []string) ([]store.Due, error) {
	if len(members) == 0 {
		return nil, nil
	}
	out := make([]store.Due, len(members))
	for i, m := range members {
		if len(m) <= deadlineKeyLen {
			return nil, fmt.Errorf("%w: due index member %q", ErrCorrupt, m)
		}
		t, ok := parseDeadlineKey(m[:deadlineKeyLen])
		if !ok {
			return nil, fmt.Errorf("%w: due index member %q", ErrCorrupt, m)
		}
		out[i] = store.Due{ID: m[deadlineKeyLen:], Deadline: t}
	}
	return out, nil
}

// Due returns up to limit lobbies whose deadline is at or before now, in
// (deadline, ID byte order) order, with deadlines in UTC; an empty result is
// nil. A limit below 1 is store.ErrInvalid. Due ignores claims. It costs
// O(log n + limit) per shard.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: limit %d", store.ErrInvalid, limit)
	}
	bound := upperBound(now)
	cmds := make(rueidis.Commands, len(s.shards))
	for k := range s.shards {
		cmds[k] = s.c.B().Zrangebylex().Key(s.shards[k].due).Min("-").Max(bound).Limit(0, int64(limit)).Build()
	}
	var members []string
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		ms, err := r.AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: due: %w", err)
		}
		members = append(members, ms...)
	}
	if len(s.shards) > 1 {
		slices.Sort(members)
		members = members[:min(len(members), limit)]
	}
	return toDue(members)
}

// Claim is Due without the lobbies claimed until after now, and claims the
// lobbies it returns until now+hold; a Write or Delete of a lobby releases
// its claim. Claims are judged by the now arguments, not by any clock, so
// a claim made with (now, hold) blocks calls whose now is before now+hold. A
// limit below 1 or a hold below 1ns is store.ErrInvalid.
//
// With one shard, Claim is one script: concurrent Claims never return the
// same lobby while its claim holds. With several, it first looks in every
// shard, then claims its picks in each shard with a script that re-checks
// them; a pick that another Claim took or a Write moved in between is left
// out, so Claim may return fewer than limit lobbies although more are due,
// but never a lobby another Claim holds.
//
// Skipping claimed lobbies costs a look at each of them: a Claim walks the
// due index from its start until it has limit unclaimed lobbies.
func (s *Store) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: limit %d", store.ErrInvalid, limit)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("redisstore: %w: hold %v", store.ErrInvalid, hold)
	}
	args := []string{"scan", upperBound(now), deadlineKey(now), deadlineKey(now.Add(hold)), strconv.Itoa(limit), ""}
	if len(s.shards) == 1 {
		sh := &s.shards[0]
		args[5] = sh.rec
		members, err := s.claim.exec(ctx, s.c, []string{sh.due}, args).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim: %w", err)
		}
		return toDue(members)
	}

	// Look without claiming, pick the first limit over all shards.
	args[0] = "peek"
	multi := make([]rueidis.LuaExec, len(s.shards))
	for k := range s.shards {
		a := slices.Clone(args)
		a[5] = s.shards[k].rec
		multi[k] = rueidis.LuaExec{Keys: []string{s.shards[k].due}, Args: a}
	}
	type pick struct {
		member string
		shard  int
	}
	var picks []pick
	for k, r := range s.claim.execMulti(ctx, s.c, multi) {
		ms, err := r.AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim: %w", err)
		}
		for _, m := range ms {
			picks = append(picks, pick{m, k})
		}
	}
	if len(picks) == 0 {
		return nil, nil
	}
	slices.SortFunc(picks, func(a, b pick) int {
		switch {
		case a.member < b.member:
			return -1
		case a.member > b.member:
			return 1
		}
		return 0
	})
	picks = picks[:min(len(picks), limit)]

	// Claim the picks, one script per shard that has any.
	args[0] = "ids"
	byShard := make(map[int][]string)
	var order []int
	for _, p := range picks {
		if _, ok := byShard[p.shard]; !ok {
			order = append(order, p.shard)
		}
		byShard[p.shard] = append(byShard[p.shard], p.member)
	}
	multi = multi[:0]
	for _, k := range order {
		a := append(slices.Clone(args), byShard[k]...)
		a[5] = s.shards[k].rec
		multi = append(multi, rueidis.LuaExec{Keys: []string{s.shards[k].due}, Args: a})
	}
	var members []string
	for _, r := range s.claim.execMulti(ctx, s.c, multi) {
		ms, err := r.AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim: %w", err)
		}
		members = append(members, ms...)
	}
	slices.Sort(members)
	return toDue(members)
}
