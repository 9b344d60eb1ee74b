package pgxstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tuning of the listening connection and the wake-ups.
const (
	// listenKeepalive is how long the listener waits for a notification
	// before it pings the server to find out whether the connection still
	// works (a half-open TCP connection would otherwise stay silent).
	listenKeepalive = 30 * time.Second
	// pingTimeout bounds that ping.
	pingTimeout = 5 * time.Second
	// minBackoff and maxBackoff bound the pause between reconnect attempts.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
	// wakeTimeout bounds one wake-up statement.
	wakeTimeout = 5 * time.Second
)

// notifier fans the notifications of one listening connection out to every
// channel handed out by Notify. The connection exists only while someone
// subscribes.
type notifier struct {
	s    *Store
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// stop cancels the running listener; nil while none runs.
	stop context.CancelFunc
	// keepalive is listenKeepalive, shortened by tests.
	keepalive time.Duration
	// pings counts the keepalive pings that succeeded.
	pings atomic.Int64
	// listened, if set (by tests, before the first Notify), is called with
	// the backend PID of each connection once it is listening.
	listened func(pid uint32)
}

func (n *notifier) init(s *Store) {
	n.s = s
	n.subs = make(map[chan struct{}]struct{})
	n.keepalive = listenKeepalive
}

// Notify returns a channel that receives a value (coalesced: one value may
// stand for many writes) after every successful Write and Delete by any
// process sharing the schema, and once more whenever the listening
// connection had to be re-established (notifications sent meanwhile are
// lost). It is closed when ctx is done.
//
// The Store keeps one dedicated connection (outside the pool, configured
// like it) listening while any channel is open, pings it after a quiet
// half minute to detect a dead link, and reconnects with backoff.
// Notify returns an error if that connection has to be opened and cannot
// be; once Notify has returned, writes committed afterwards are signalled.
//
// Wake-ups are best effort, not part of the write: the writing process
// sends them after its commit, asynchronously and coalesced (at most one
// per wake interval per Store, see [WithWakeInterval]), in a transaction of
// their own. This keeps NOTIFY's commit-serialising lock off the write
// path. A writer that crashes between its commit and the wake-up, or cannot
// reach the database for it, wakes nobody, so relays and sweepers should
// still look on their own every few seconds.
func (s *Store) Notify(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stop == nil {
		conn, err := n.listen(ctx)
		if err != nil {
			return nil, s.fail(ctx, "notify", "", err)
		}
		lctx, cancel := context.WithCancel(context.Background())
		n.stop = cancel
		go n.run(lctx, conn)
	}
	ch := make(chan struct{}, 1)
	n.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.subs, ch)
		close(ch)
		if len(n.subs) == 0 && n.stop != nil {
			n.stop()
			n.stop = nil
		}
	})
	return ch, nil
}

// listen opens a connection configured like the pool's and starts listening.
func (n *notifier) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, n.s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(n.s.channel)); err != nil {
		closeQuietly(conn)
		return nil, err
	}
	if n.listened != nil {
		n.listened(conn.PgConn().PID())
	}
	return conn, nil
}

// run delivers notifications from conn until ctx is done, replacing the
// connection whenever it fails.
func (n *notifier) run(ctx context.Context, conn *pgx.Conn) {
	for {
		err := n.wait(ctx, conn)
		if ctx.Err() != nil {
			closeQuietly(conn)
			return
		}
		if err == nil {
			n.broadcast()
			continue
		}
		closeQuietly(conn)
		if conn = n.reconnect(ctx); conn == nil {
			return
		}
		n.broadcast()
	}
}

// wait returns nil after a notification, or an error once the connection
// proved broken (or ctx is done). Silence longer than listenKeepalive is
// answered by a ping.
func (n *notifier) wait(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, n.keepalive)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
		n.pings.Add(1)
	}
}

// reconnect retries listen with capped exponential backoff until it works
// (returning the connection) or ctx is done (returning nil).
func (n *notifier) reconnect(ctx context.Context) *pgx.Conn {
	backoff := minBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := n.listen(ctx)
		if err == nil {
			return conn
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// broadcast gives every subscriber a value unless it already holds one.
func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// waker sends this Store's wake-ups: after a successful Write or Delete,
// wake marks one as pending and makes sure a sender goroutine runs; the
// sender issues one NOTIFY for everything that piled up while the previous
// one was in flight or the wake interval was running.
type waker struct {
	pending atomic.Bool // a write committed since the last NOTIFY was sent
	running atomic.Bool // a sender goroutine exists
}

// wake is called after every successful Write and Delete. It never blocks.
func (s *Store) wake() {
	s.waker.pending.Store(true)
	if s.waker.running.CompareAndSwap(false, true) {
		go s.sendWakes()
	}
}

func (s *Store) sendWakes() {
	for {
		for s.waker.pending.Swap(false) {
			ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
			_, err := s.pool.Exec(ctx, s.q.wake)
			cancel()
			if err != nil {
				// Leave it pending for the next successful write to
				// retry, rather than hammer a database that is down.
				s.waker.pending.Store(true)
				s.waker.running.Store(false)
				return
			}
			if s.wakeInterval > 0 {
				time.Sleep(s.wakeInterval) // rate limit, not synchronisation
			}
		}
		s.waker.running.Store(false)
		// A wake that came after the Swap above but before running was
		// cleared saw a running sender and started none: take it over.
		if !s.waker.pending.Load() || !s.waker.running.CompareAndSwap(false, true) {
			return
		}
	}
}
