package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// WriteBatch applies each of ws as [Store.Write] would and returns one
// outcome per write, in the order of ws. It implements store.BatchWriter.
//
// Every write is validated first, as Write does; one that Write would
// refuse with store.ErrInvalid gets that error here and is not sent. The
// others go out as one pipeline of write-script calls (EVALSHA), one per
// write, in the given order: each call is its own atomic compare-and-set on
// its own lobby, exactly as a Write, so a conflict or a failure of one
// leaves the others alone, and Redis runs the calls of one connection in
// the order they were sent, so writes to the same lobby apply in the given
// order. On a Redis Cluster the client splits the pipeline by slot, one per
// node, sent together; every key of a write lies in its lobby's shard slot,
// so a lobby's writes stay on one connection and in order.
//
// A server that has lost the script (a restart, a failover, SCRIPT FLUSH)
// answers NOSCRIPT; such a write is run again alone with EVAL, and so is
// every later write to the same lobby in the batch that reported a
// conflict (it may have depended on the one that did not run). A write to
// the same lobby that committed in between, because it did not depend on
// the earlier one, stays committed, so in that rare case the earlier write
// may report a conflict it would not have met alone.
//
// A network failure or a context that ends while the pipeline is in flight
// leaves the writes whose replies did not arrive with an unknown outcome,
// reported as an error that is neither store.ErrConflict nor
// store.ErrInvalid. WriteBatch does not retain ws or any slice in it.
func (s *Store) WriteBatch(ctx context.Context, ws []store.Write) []error {
	errs := make([]error, len(ws))
	if len(ws) == 0 {
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	idx := make([]int, 0, len(ws))
	calls := make([]rueidis.LuaExec, 0, len(ws))
	cmds := make(rueidis.Commands, 0, len(ws))
	for i := range ws {
		w := &ws[i]
		if err := w.Validate(); err != nil {
			errs[i] = fmt.Errorf("redisstore: %w", err)
			continue
		}
		keys, args := s.writeCall(w)
		idx = append(idx, i)
		calls = append(calls, rueidis.LuaExec{Keys: keys, Args: args})
		cmds = append(cmds, s.c.B().Evalsha().Sha1(s.write.sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	if len(cmds) == 0 {
		return errs
	}
	res := s.c.DoMulti(ctx, cmds...)
	// redo holds the lobbies whose writes after a NOSCRIPT must run again.
	var redo map[string]bool
	for k, r := range res {
		w := &ws[idx[k]]
		if rerr, ok := rueidis.IsRedisErr(r.Error()); ok && rerr.IsNoScript() || redo[w.ID] && isConflictReply(r) {
			if redo == nil {
				redo = make(map[string]bool)
			}
			redo[w.ID] = true
			r = s.write.exec(ctx, s.c, calls[k].Keys, calls[k].Args)
		}
		msg, err := r.ToMessage()
		if err != nil {
			errs[idx[k]] = fmt.Errorf("redisstore: write %q: %w", w.ID, err)
			continue
		}
		errs[idx[k]] = casResult(&msg, "write", w.ID, w.Expected)
	}
	return errs
}

// isConflictReply reports whether r is the write script's answer to a
// version mismatch: the stored version, a string.
func isConflictReply(r rueidis.RedisResult) bool {
	if r.Error() != nil {
		return false
	}
	msg, err := r.ToMessage()
	if err != nil {
		return false
	}
	_, err = msg.ToString()
	return err == nil && !msg.IsInt64()
}
