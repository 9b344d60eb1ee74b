package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Every Write script that appends events publishes on the store's channel;
// heartbeats (writes without events) and Deletes do not, so the hot path
// stays one cheap script. Notify subscribes to the channel; a message
// carries no data, it only says "look again".

// resubscribeDelay is how long Notify waits before subscribing again after
// losing its connection, so that a server that is down is not hammered.
const resubscribeDelay = 250 * time.Millisecond

// Notify returns a channel that receives a value (coalesced: one value may
// stand for many writes) after Writes that append events, by any process
// using the same server and prefix, from the moment Notify returns. The channel is
// closed once ctx is done or the client is closed.
//
// Pub/sub delivers at most once: when the subscription's connection breaks,
// Notify subscribes again and then sends a value, since writes may have
// gone unseen meanwhile. It returns ctx's error if ctx is done, and an
// error if the first subscription fails (the server is unreachable, say).
func (s *Store) Notify(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Receive keeps retrying while the server is unreachable; ask once
	// first so that Notify fails promptly then.
	if err := s.c.Do(ctx, s.c.B().Ping().Build()).Error(); err != nil {
		return nil, fmt.Errorf("redisstore: notify: %w", err)
	}
	n := newWakeChan()
	ch, poke := n.ch, n.poke

	var (
		mu         sync.Mutex
		subscribed bool // the first confirmation has come
		ready      = make(chan struct{})
	)
	hook := func(sub rueidis.PubSubSubscription) {
		if sub.Kind != "subscribe" {
			return
		}
		mu.Lock()
		first := !subscribed
		subscribed = true
		mu.Unlock()
		if first {
			close(ready)
		} else {
			poke() // a resubscription: writes may have been missed
		}
	}
	sctx := rueidis.WithOnSubscriptionHook(ctx, hook)
	failed := make(chan error, 1)

	go func() {
		defer n.close()
		for {
			err := s.c.Receive(sctx, s.c.B().Subscribe().Channel(s.channel).Build(), func(rueidis.PubSubMessage) { poke() })
			if ctx.Err() != nil || errors.Is(err, rueidis.ErrClosing) {
				mu.Lock()
				first := !subscribed
				mu.Unlock()
				if first {
					failed <- fmt.Errorf("redisstore: notify: %w", err)
				}
				return
			}
			mu.Lock()
			first := !subscribed
			mu.Unlock()
			if first {
				failed <- fmt.Errorf("redisstore: notify: %w", err)
				return
			}
			t := time.NewTimer(resubscribeDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			// The next Receive confirms a new subscription through hook,
			// which pokes: nothing more to do here.
		}
	}()

	select {
	case <-ready:
		return ch, nil
	case err := <-failed:
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
}

// wakeChan is a coalescing wake-up channel that may be poked from rueidis'
// pipe goroutine (message and subscription callbacks) after the goroutine
// that owns it has closed it: rueidis can deliver a message for a
// subscription while Receive is returning. poke after close is a no-op,
// never a send on a closed channel, and close and poke never race.
type wakeChan struct {
	mu     sync.Mutex
	ch     chan struct{}
	closed bool
}

func newWakeChan() *wakeChan { return &wakeChan{ch: make(chan struct{}, 1)} }

func (w *wakeChan) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *wakeChan) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
}
