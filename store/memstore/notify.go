package memstore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lobbyhost/lobbyhost/store"
)

// feeds holds the live subscriptions. list is replaced, never modified, so
// a writer reads it with one atomic load and no lock.
type feeds struct {
	mu   sync.Mutex // serialises changes to list
	list atomic.Pointer[[]*subscription]
}

type subscription struct {
	feed *store.Feed
	done <-chan struct{} // the subscriber's ctx.Done()
}

// add gives c to every live feed. A subscription whose context is done
// gets nothing, even before the AfterFunc that removes it has run.
func (f *feeds) add(c store.Change) {
	p := f.list.Load()
	if p == nil {
		return
	}
	for _, sub := range *p {
		select {
		case <-sub.done:
			continue
		default:
		}
		sub.feed.Add(c)
	}
}

// Subscribe returns a Feed that receives a Change for every Write with
// Effects that commits after Subscribe returns, until ctx is done. Each
// Change is added after its write unlocked, so a ReadLog after Take sees
// the entry. Writers never wait for the reader: a Feed that overflows (see
// store.NewFeed; memstore uses the default size) marks itself lost.
func (s *Store) Subscribe(ctx context.Context) (*store.Feed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub := &subscription{feed: store.NewFeed(0), done: ctx.Done()}
	f := &s.feeds
	f.mu.Lock()
	var list []*subscription
	if p := f.list.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, sub)
	f.list.Store(&list)
	f.mu.Unlock()

	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		kept := slices.DeleteFunc(slices.Clone(*f.list.Load()), func(o *subscription) bool { return o == sub })
		if len(kept) == 0 {
			f.list.Store(nil)
		} else {
			f.list.Store(&kept)
		}
	})
	return sub.feed, nil
}
