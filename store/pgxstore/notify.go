package pgxstore

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lobbyhost/lobbyhost/store"
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
// Feed handed out by Subscribe. The connection exists only while someone
// subscribes.
type notifier struct {
	s    *Store
	mu   sync.Mutex
	subs map[*store.Feed]struct{}
	// stop cancels the running listener; nil while none runs.
	stop context.CancelFunc
	// keepalive is listenKeepalive, shortened by tests.
	keepalive time.Duration
	// pings counts the keepalive pings that succeeded.
	pings atomic.Int64
	// lostAfterReconnect counts the reconnections after which the feeds were
	// marked lost.
	lostAfterReconnect atomic.Int64
	// listened, if set (by tests, before the first Subscribe), is called
	// with the backend PID of each connection once it is listening.
	listened func(pid uint32)
}

func (n *notifier) init(s *Store) {
	n.s = s
	n.subs = make(map[*store.Feed]struct{})
	n.keepalive = listenKeepalive
}

// Subscribe returns a Feed that receives a store.Change (lobby and
// position) for every Write with a log entry that commits after Subscribe
// returns, by any process sharing the schema, until ctx is done. Writes
// without an entry (heartbeats) and Deletes notify nobody.
//
// The notification is part of the write: the write function calls
// pg_notify, which PostgreSQL delivers when, and only if, the transaction
// commits, so a reader that takes the Change and calls ReadLog sees the
// entry. The payload is the position in decimal, a space, and the lobby ID
// in standard base64 (IDs are arbitrary bytes, NUL included). The price is
// PostgreSQL's: committing transactions that notify queue for one
// database-wide lock, so writes with entries commit one at a time
// (heartbeats are not affected).
//
// The Store keeps one dedicated connection (outside the pool, configured
// like it) listening while any Feed is subscribed, shared by all of them. It
// pings that connection after a quiet half minute to detect a dead link,
// and reconnects with backoff; every Feed is marked lost (Feed.Lose) when
// the connection fails, since notifications sent meanwhile are gone, and
// whenever a payload cannot be read. Subscribe returns an error if that
// connection has to be opened and cannot be.
func (s *Store) Subscribe(ctx context.Context) (*store.Feed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := &s.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stop == nil {
		conn, err := n.listen(ctx)
		if err != nil {
			return nil, s.fail(ctx, "subscribe", "", err)
		}
		lctx, cancel := context.WithCancel(context.Background())
		n.stop = cancel
		go n.run(lctx, conn)
	}
	f := store.NewFeed(0)
	n.subs[f] = struct{}{}
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.subs, f)
		if len(n.subs) == 0 && n.stop != nil {
			n.stop()
			n.stop = nil
		}
	})
	return f, nil
}

// changePayload is the notification payload of a write: the position in
// decimal, a space, the lobby ID in standard base64.
func changePayload(id string, version uint64) string {
	return strconv.FormatUint(version, 10) + " " + base64.StdEncoding.EncodeToString([]byte(id))
}

// parsePayload reverses changePayload.
func parsePayload(p string) (store.Change, bool) {
	v, id, ok := strings.Cut(p, " ")
	if !ok {
		return store.Change{}, false
	}
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return store.Change{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(id)
	if err != nil || len(raw) == 0 {
		return store.Change{}, false
	}
	return store.Change{Lobby: string(raw), Version: version}, true
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
		payload, err := n.wait(ctx, conn)
		if ctx.Err() != nil {
			closeQuietly(conn)
			return
		}
		if err == nil {
			if c, ok := parsePayload(payload); ok {
				n.deliver(c)
			} else {
				n.lose() // e.g. a process of an earlier release
			}
			continue
		}
		n.lose()
		closeQuietly(conn)
		if conn = n.reconnect(ctx); conn == nil {
			return
		}
		// Notifications committed before the new LISTEN are gone; lose
		// again so that readers check heads after it took effect.
		n.lose()
		n.lostAfterReconnect.Add(1)
	}
}

// wait returns the payload of the next notification, or an error once the
// connection proved broken (or ctx is done). Silence longer than
// listenKeepalive is answered by a ping.
func (n *notifier) wait(ctx context.Context, conn *pgx.Conn) (string, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, n.keepalive)
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			return note.Payload, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
			return "", err
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return "", err
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

// deliver adds c to every subscribed Feed.
func (n *notifier) deliver(c store.Change) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for f := range n.subs {
		f.Add(c)
	}
}

// lose marks every subscribed Feed lost.
func (n *notifier) lose() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for f := range n.subs {
		f.Lose()
	}
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
