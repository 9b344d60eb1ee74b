package lobby

import (
	"container/heap"
	"context"
)

// expireDue is one pass of the expiry loop (liveness.expireLoop) without
// its wait: it commits the time-outs of the held generations whose
// deadlines have passed, each as of its deadline, and puts back for a
// retry those whose commit failed. The simulation runs it as a step of
// its schedule, since a loop that sleeps on a clock cannot be scheduled.
func (l *liveness) expireDue(ctx context.Context) {
	now := l.s.clock.Now()
	var todo []heldKey
	var ids []string
	l.mu.Lock()
	for len(l.due) > 0 && !l.due[0].due.After(now) {
		g := heap.Pop(&l.due).(*heldGen)
		if g.lost {
			if hl := l.lobbies[g.lobby]; hl != nil {
				l.dropLocked(hl, g.lobby, g.key)
			}
			continue
		}
		todo, ids = append(todo, g.key), append(ids, g.lobby)
	}
	l.mu.Unlock()
	if len(todo) == 0 || l.timeOuts(ctx, ids, todo) == 0 {
		return
	}
	retry := l.s.clock.Now().Add(backoff(1))
	l.mu.Lock()
	for i, k := range todo {
		if hl := l.lobbies[ids[i]]; hl != nil {
			if g := hl.gens[k]; g != nil && g.index < 0 && !g.lost {
				g.due = retry
				heap.Push(&l.due, g)
			}
		}
	}
	l.mu.Unlock()
}
