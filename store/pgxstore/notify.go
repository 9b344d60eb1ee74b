package pgxstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tuning of the listening connection.
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

// Notify returns a channel that receives a value after every Write that
// appends events, by any process sharing the schema, and once more whenever
// the listening connection had to be re-established (notifications sent
// meanwhile are lost). Values are coalesced: one may stand for many writes.
// Writes without events (heartbeats) and Deletes notify nobody. The channel
// is closed when ctx is done.
//
// The notification is part of the write: the statement that appends the
// events also calls pg_notify, which PostgreSQL delivers when, and only if,
// the transaction commits, even if the writing process dies right after.
// The price is PostgreSQL's: committing transactions that notify queue for
// one database-wide lock, so writes with events commit one at a time
// (heartbeats are not affected).
//
// The Store keeps one dedicated connection (outside the pool, configured
// like it) listening while any channel is open, pings it after a quiet
// half minute to detect a dead link, and reconnects with backoff. Notify
// returns an error if that connection has to be opened and cannot be; once
// Notify has returned, every qualifying write committed afterwards is
// signalled.
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
