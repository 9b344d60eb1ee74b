package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// Every Write script that appends a log entry publishes "<position>:<ID>" on
// the store's channel; writes without an entry, and Deletes, publish
// nothing. Redis runs PUBLISH inside the script, after the script's writes
// and before any other client's command, so a subscriber that reads the log
// on a message finds the entry. The position is decimal and holds no ':',
// so the ID is everything after the first ':', byte for byte (pub/sub
// messages are binary-safe: NUL and any other byte pass unchanged).
//
// Stores of earlier versions published "w" on the same channel for every
// write with events. Subscribe counts any message it cannot read as a lost
// notification, so during a rolling upgrade readers check their lobbies'
// heads instead of missing a change.

// resubscribeDelay is how long a subscription waits before subscribing
// again after losing its connection, so that a server that is down is not
// hammered.
const resubscribeDelay = 250 * time.Millisecond

// notification is the message the write script publishes for a change.
func notification(c store.Change) string {
	return strconv.FormatUint(c.Version, 10) + ":" + c.Lobby
}

// parseNotification is the inverse of notification.
func parseNotification(msg string) (store.Change, bool) {
	v, id, ok := strings.Cut(msg, ":")
	if !ok || id == "" {
		return store.Change{}, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return store.Change{}, false
	}
	return store.Change{Lobby: id, Version: n}, true
}

// Subscribe returns a Feed that receives a store.Change for every Write
// with a log entry that commits after Subscribe returns, by any process
// using the same server and prefix, until ctx is done or the client is
// closed.
//
// Pub/sub delivers at most once. When the subscription's connection
// breaks, Subscribe marks the feed lost (the reader then checks its
// lobbies' heads, which covers everything published until the
// subscription is back) and subscribes again: rueidis at once if its
// retries allow, else Subscribe after a short pause. A message it cannot
// read also marks the feed lost. It returns ctx's error if ctx is done, and
// an error if the first subscription fails (the server is unreachable,
// say).
func (s *Store) Subscribe(ctx context.Context) (*store.Feed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Receive keeps retrying while the server is unreachable; ask once
	// first so that Subscribe fails promptly then.
	if err := s.c.Do(ctx, s.c.B().Ping().Build()).Error(); err != nil {
		return nil, fmt.Errorf("redisstore: subscribe: %w", err)
	}
	feed := store.NewFeed(0)
	g := &gate{feed: feed}

	var (
		mu         sync.Mutex
		subscribed bool // the first confirmation has come
		broken     bool // the subscription broke since its last confirmation
		ready      = make(chan struct{})
	)
	isFirst := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !subscribed
	}
	// The subscription hook only tells when the first subscription is
	// confirmed. rueidis calls the hooks of every Receive of a channel on a
	// connection when any of them is confirmed, so a later call may come
	// from another subscriber of the same store: it says nothing about
	// this one. What does is the return hook: rueidis calls it whenever
	// one attempt of Receive ends, also when it then subscribes again by
	// itself after a broken connection, and everything published from then
	// until the new subscription is missed.
	hook := func(sub rueidis.PubSubSubscription) {
		if sub.Kind != "subscribe" {
			return
		}
		mu.Lock()
		first := !subscribed
		again := broken
		subscribed, broken = true, false
		mu.Unlock()
		if first {
			close(ready)
			return
		}
		if again {
			// Subscribed again after a break: the reader may have
			// checked its heads as soon as the break was reported,
			// before the subscription was back, and what was published
			// in between reached nobody. Checking again now covers it.
			g.lose()
		}
	}
	breaks := func() {
		mu.Lock()
		broken = true
		mu.Unlock()
		g.lose()
	}
	onReturn := func(err error, _ rueidis.CommandClient) error {
		if err != nil && ctx.Err() == nil {
			breaks()
		}
		return err
	}
	sctx := rueidis.WithOnReceiveReturnHook(rueidis.WithOnSubscriptionHook(ctx, hook), onReturn)
	failed := make(chan error, 1)
	onMessage := func(m rueidis.PubSubMessage) {
		if c, ok := parseNotification(m.Message); ok {
			g.add(c)
		} else {
			g.lose()
		}
	}

	go func() {
		defer g.close()
		for {
			err := s.c.Receive(sctx, s.c.B().Subscribe().Channel(s.channel).Build(), onMessage)
			if isFirst() {
				failed <- fmt.Errorf("redisstore: subscribe: %w", err)
				return
			}
			if ctx.Err() != nil || errors.Is(err, rueidis.ErrClosing) {
				return
			}
			breaks()
			t := time.NewTimer(resubscribeDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			// The feed is marked lost already (by onReturn, and above for
			// a Receive that gave up): anything published until the next
			// subscription is missed, and the reader checks heads after.
		}
	}()

	select {
	case <-ready:
		return feed, nil
	case err := <-failed:
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
}

// gate passes changes to a feed until it is closed. rueidis may run a
// message or subscription callback while Receive is returning, after the
// subscription's context is done; the gate keeps such late calls from
// touching the feed once its subscription has ended.
type gate struct {
	mu     sync.Mutex
	feed   *store.Feed
	closed bool
}

func (g *gate) add(c store.Change) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.feed.Add(c)
	}
}

func (g *gate) lose() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.feed.Lose()
	}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}
