package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/lobbyhost/lobbyhost/store"
)

// outbox is the pending events in commit order: a doubly linked list for the
// order, and an index by (lobby, seq) so an Ack, in any order, unlinks its
// event in O(1) and nothing of it stays behind.
type outbox struct {
	mu    sync.Mutex
	head  outNode // sentinel: head.next is the oldest event, head.prev the newest
	index map[eventKey]*outNode
}

type eventKey struct {
	lobby string
	seq   uint64
}

type outNode struct {
	prev, next *outNode
	event      store.Event // Data is the store's own copy
	// same links events that share a (lobby, seq) key, which the contract
	// forbids but a careless caller can still write; one Ack removes them all.
	same *outNode
}

func (o *outbox) init() {
	o.head.prev, o.head.next = &o.head, &o.head
	o.index = make(map[eventKey]*outNode)
}

// append copies events to the end of the outbox, in order, with one
// allocation for their nodes and one for their data.
func (o *outbox) append(events []store.Event) {
	size := 0
	for i := range events {
		size += len(events[i].Data)
	}
	buf := make([]byte, 0, size)
	nodes := make([]outNode, len(events))
	for i := range events {
		n := &nodes[i]
		n.event = events[i]
		if len(events[i].Data) > 0 {
			start := len(buf)
			buf = append(buf, events[i].Data...)
			n.event.Data = buf[start:len(buf):len(buf)]
		} else {
			n.event.Data = nil
		}
	}

	o.mu.Lock()
	for i := range nodes {
		n := &nodes[i]
		k := eventKey{n.event.Lobby, n.event.Seq}
		n.same = o.index[k]
		o.index[k] = n
		n.prev = o.head.prev
		n.next = &o.head
		o.head.prev.next = n
		o.head.prev = n
	}
	o.mu.Unlock()
}

// Pending returns copies of up to limit unacknowledged events, oldest write
// first, the events of one write in the order they were given; an empty
// outbox gives nil. A limit below 1 is store.ErrInvalid. Events stay pending
// until acknowledged.
func (s *Store) Pending(ctx context.Context, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	o := &s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	n, size := 0, 0
	for p := o.head.next; p != &o.head && n < limit; p = p.next {
		n++
		size += len(p.event.Data)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]store.Event, 0, n)
	buf := make([]byte, 0, size)
	for p := o.head.next; len(out) < n; p = p.next {
		ev := p.event
		if len(ev.Data) > 0 {
			start := len(buf)
			buf = append(buf, ev.Data...)
			// Cap each slice so appending to one cannot overwrite the next.
			ev.Data = buf[start:len(buf):len(buf)]
		}
		out = append(out, ev)
	}
	return out, nil
}

// Ack removes the events named by (Lobby, Seq); Data is ignored, and unknown
// or already acknowledged events are skipped. The caller keeps events.
func (s *Store) Ack(ctx context.Context, events []store.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &s.out
	o.mu.Lock()
	for i := range events {
		k := eventKey{events[i].Lobby, events[i].Seq}
		n, ok := o.index[k]
		if !ok {
			continue
		}
		delete(o.index, k)
		for ; n != nil; n = n.same {
			n.prev.next = n.next
			n.next.prev = n.prev
			n.prev, n.next = nil, nil
		}
	}
	o.mu.Unlock()
	return nil
}
