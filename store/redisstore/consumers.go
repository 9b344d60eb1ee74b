package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// Durable consumers. Every shard keeps the set of registered names,
// {P:k}:names, which the write script reads: that keeps every key a write
// touches in the lobby's slot. For each name, a shard keeps
//
//   - {P:k}:c:N, a hash from lobby ID to the name's cursor for the lobby,
//     "<cursor>", or "<cursor> <queue key>" while the lobby is queued, and
//   - {P:k}:q:N, the queue: a sorted set whose members are the 25-byte queue
//     key followed by the lobby ID, all with score 0, ordered by bytes.
//
// A queue key is '0' and 24 digits of the server's clock in microseconds
// when the lobby's work became waiting (so unclaimed lobbies come oldest
// first), or '1' and the claimed-until key of a claim (deadlineKey of
// now+hold, as the claimer's now says). A claim is over at a now at or
// after its until, so the claims over at now are the members from "1" up
// to, not including, "1"+afterKey(now): finding work never looks at a
// lobby that is held, nor at a lobby without work.
//
// The write script gives a lobby a cursor, just before the new entry, the
// first time an entry arrives for a name that has none for it, and queues
// the lobby whenever an entry after the cursor arrives and it is not queued
// yet. CommitLog raises the cursor and either puts the lobby back in the
// queue, unclaimed (the log has entries after the cursor: a write that
// landed while the lobby was claimed is not lost), or takes it out of the
// queue, keeping the cursor (a commit past the head holds: an entry at or
// below it is no work). A lobby's cursors go when its keys go (a fold), for
// the names that have nothing queued for it.

// validName reports whether name can be a consumer name: like a lobby ID,
// any non-empty bytes.
func validName(name string) error {
	if name == "" {
		return fmt.Errorf("redisstore: %w: empty consumer name", store.ErrInvalid)
	}
	return nil
}

// RegisterConsumer registers name in every shard, in one pipelined round
// trip; registering it again changes nothing. Entries of writes that commit
// after it returns are queued for name; earlier ones are not. An empty name
// is store.ErrInvalid. If it fails, the name may be registered in some
// shards; calling it again completes the registration.
func (s *Store) RegisterConsumer(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validName(name); err != nil {
		return err
	}
	return s.register(ctx, name)
}

func (s *Store) register(ctx context.Context, name string) error {
	cmds := make(rueidis.Commands, len(s.shards))
	for k := range s.shards {
		cmds[k] = s.c.B().Sadd().Key(s.shards[k].names).Member(name).Build()
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("redisstore: register consumer %q: %w", name, err)
		}
	}
	s.registered.Store(name, struct{}{})
	return nil
}

// ClaimLog returns up to limit lobbies with entries name has not committed,
// each with name's cursor, and claims them for name until now+hold; lobbies
// name holds a claim on at now are skipped. It registers name first if this
// Store has not yet (one extra round trip, once per name and process).
//
// Lobbies come in this order: those whose claim ran out (they waited
// longest), earliest claim end first, then unclaimed ones, the one whose
// work has waited longest first, over all shards. With one shard, or with
// several on a client that is not a Cluster client (every shard then lives
// on one server), ClaimLog is one script, atomic. On a Cluster with several
// shards, whose scripts cannot reach across slots, it first reads each
// shard's queue,
// picks the first limit lobbies overall, then claims them in one script per
// shard, pipelined; a pick another claimer took in between is left out and
// the shards are read again (a few rounds at most), so it never returns a
// lobby another claimer holds, and returns fewer than limit lobbies while
// others wait only if claimers keep taking its picks. Its view of the
// shards is not one snapshot: a lobby that gets work in a shard already
// read waits for the next ClaimLog.
//
// A limit below 1, a hold below 1ns or an empty name is store.ErrInvalid.
func (s *Store) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("redisstore: %w: claim log with limit %d", store.ErrInvalid, limit)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("redisstore: %w: claim log with hold %v", store.ErrInvalid, hold)
	}
	if _, ok := s.registered.Load(name); !ok {
		if err := s.register(ctx, name); err != nil {
			return nil, err
		}
	}
	over := "+" // the claims that are over at now; every one at the last instant
	if k, ok := afterKey(now); ok {
		over = "(1" + k
	}
	args := []string{"scan", over, "1" + deadlineKey(now.Add(hold)), strconv.Itoa(limit)}
	if len(s.shards) == 1 || s.c.Mode() != rueidis.ClientModeCluster {
		// Every shard is on this one server: one script claims over all
		// of them, atomically.
		keys := make([]string, 0, 2*len(s.shards))
		for k := range s.shards {
			cursors, queue := s.shards[k].consumerKeys(name)
			keys = append(keys, cursors, queue)
		}
		res, err := s.claimLog.exec(ctx, s.c, keys, args).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim log for %q: %w", name, err)
		}
		claimed, err := toCursors(res)
		if err != nil {
			return nil, err
		}
		return claimed, nil
	}

	// Rounds of look, pick and claim. A round whose picks were all claimed
	// saw every lobby with work it could (up to what was left of limit),
	// so it is the last; one that lost picks to another claimer looks
	// again, so that a ClaimLog does not come back short while lobbies
	// with work are waiting.
	var out []store.Cursor
	for range maxClaimRounds {
		got, picked, err := s.claimRound(ctx, name, over, args, limit-len(out))
		if err != nil {
			return out, err
		}
		out = append(out, got...)
		if len(got) == picked || len(out) >= limit {
			break
		}
	}
	return out, nil
}

// maxClaimRounds bounds the rounds of a ClaimLog with several shards, so
// that claimers racing for the same few lobbies cannot keep one busy.
const maxClaimRounds = 4

// claimRound is one round of ClaimLog with several shards: it reads the
// claimable part of every shard's queue (pipelined), picks the first limit
// lobbies overall, and claims them with one script per shard (pipelined)
// that re-checks each. It returns what it claimed, in pick order, and how
// many it picked.
func (s *Store) claimRound(ctx context.Context, name, over string, args []string, limit int) ([]store.Cursor, int, error) {
	cmds := make(rueidis.Commands, 0, 2*len(s.shards))
	for k := range s.shards {
		_, queue := s.shards[k].consumerKeys(name)
		cmds = append(cmds,
			s.c.B().Zrangebylex().Key(queue).Min("[1").Max(over).Limit(0, int64(limit)).Build(),
			s.c.B().Zrangebylex().Key(queue).Min("-").Max("(1").Limit(0, int64(limit)).Build())
	}
	type pick struct {
		member string
		shard  int
	}
	var picks []pick
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		ms, err := r.AsStrSlice()
		if err != nil {
			return nil, 0, fmt.Errorf("redisstore: claim log for %q: %w", name, err)
		}
		for _, m := range ms {
			if len(m) <= 1+deadlineKeyLen {
				return nil, 0, fmt.Errorf("%w: queue member %q of consumer %q", ErrCorrupt, m, name)
			}
			picks = append(picks, pick{m, i / 2})
		}
	}
	if len(picks) == 0 {
		return nil, 0, nil
	}
	// Claims that ran out ('1') before unclaimed work ('0'), each by its
	// key, then by lobby ID.
	slices.SortFunc(picks, func(a, b pick) int {
		if a.member[0] != b.member[0] {
			return int(b.member[0]) - int(a.member[0])
		}
		return strings.Compare(a.member, b.member)
	})
	picks = picks[:min(len(picks), limit)]

	byShard := make(map[int][]string)
	var order []int
	for _, p := range picks {
		if _, ok := byShard[p.shard]; !ok {
			order = append(order, p.shard)
		}
		byShard[p.shard] = append(byShard[p.shard], p.member)
	}
	a := slices.Clone(args)
	a[0] = "ids"
	multi := make([]rueidis.LuaExec, 0, len(order))
	for _, k := range order {
		cursors, queue := s.shards[k].consumerKeys(name)
		multi = append(multi, rueidis.LuaExec{Keys: []string{cursors, queue}, Args: append(slices.Clone(a), byShard[k]...)})
	}
	got := make(map[string]uint64, len(picks))
	for _, r := range s.claimLog.execMulti(ctx, s.c, multi) {
		res, err := r.AsStrSlice()
		if err != nil {
			return nil, 0, fmt.Errorf("redisstore: claim log for %q: %w", name, err)
		}
		cs, err := toCursors(res)
		if err != nil {
			return nil, 0, err
		}
		for _, c := range cs {
			got[c.Lobby] = c.After
		}
	}
	var out []store.Cursor
	for _, p := range picks {
		id := p.member[1+deadlineKeyLen:]
		if after, ok := got[id]; ok {
			out = append(out, store.Cursor{Lobby: id, After: after})
		}
	}
	return out, len(picks), nil
}

// toCursors reads the claim script's reply: lobby ID and cursor pairs.
func toCursors(res []string) ([]store.Cursor, error) {
	if len(res)%2 != 0 {
		return nil, fmt.Errorf("%w: claim log reply of %d values", ErrCorrupt, len(res))
	}
	if len(res) == 0 {
		return nil, nil
	}
	out := make([]store.Cursor, 0, len(res)/2)
	for i := 0; i < len(res); i += 2 {
		after, err := strconv.ParseUint(res[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: cursor %q of lobby %q", ErrCorrupt, res[i+1], res[i])
		}
		out = append(out, store.Cursor{Lobby: res[i], After: after})
	}
	return out, nil
}

// CommitLog moves name's cursor for lobby id to after, unless it is
// already there or beyond, and releases name's claim on the lobby: if the
// log has entries after the cursor the lobby is queued again, unclaimed,
// behind the work waiting already, and otherwise it leaves name's queue
// until an entry after the cursor arrives. It is one script. An empty name or ID, or a name not registered, is
// store.ErrInvalid.
func (s *Store) CommitLog(ctx context.Context, name, id string, after uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validName(name); err != nil {
		return err
	}
	if id == "" {
		return errEmptyID
	}
	sh := s.shardOf(id)
	cursors, queue := sh.consumerKeys(name)
	n, err := s.commitLog.exec(ctx, s.c, []string{sh.names, cursors, queue, sh.log + id},
		[]string{name, id, strconv.FormatUint(after, 10)}).AsInt64()
	if err != nil {
		return fmt.Errorf("redisstore: commit log of %q for %q: %w", id, name, err)
	}
	if n == -1 {
		return fmt.Errorf("redisstore: %w: commit log of %q: consumer %q is not registered", store.ErrInvalid, id, name)
	}
	return nil
}
