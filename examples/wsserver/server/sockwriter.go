package server

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// sockWriter is the write side of an upgraded connection, under the
// WebSocket library's (small) bufio.Writer. Between cork and uncork it
// collects everything the library writes, in a buffer borrowed from a
// pool, and uncork sends it in one write: a batch of queued messages costs
// one system call, not one per message. Outside a cork, writes go straight
// to the connection. Writes from the library's other users (a pong or a
// close frame answered by the reader) are serialised with the batch in
// order. Every write to the connection has a deadline of timeout on the
// real clock; abort makes the one in progress, and all later ones, fail.
type sockWriter struct {
	conn    net.Conn
	timeout time.Duration
	aborted atomic.Bool

	mu     sync.Mutex
	corked bool
	buf    *[]byte // borrowed from batchBufs while corked
}

// batchBufs lends the buffers batches are collected in.
var batchBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 4096)
	return &b
}}

// maxPooledBatch bounds the buffers returned to batchBufs, so that one
// large batch does not stay in the pool for good.
const maxPooledBatch = 64 << 10

func newSockWriter(conn net.Conn, timeout time.Duration) *sockWriter {
	return &sockWriter{conn: conn, timeout: timeout}
}

// Write collects p while corked and writes it to the connection otherwise.
func (w *sockWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.corked {
		*w.buf = append(*w.buf, p...)
		return len(p), nil
	}
	return w.writeLocked(p)
}

func (w *sockWriter) writeLocked(p []byte) (int, error) {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return 0, err
	}
	// Checked after the deadline is set: an abort that raced with it has
	// either set its past deadline after ours or is seen here.
	if w.aborted.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	return w.conn.Write(p)
}

// cork starts collecting writes.
func (w *sockWriter) cork() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.corked {
		return
	}
	w.corked = true
	w.buf = batchBufs.Get().(*[]byte)
	*w.buf = (*w.buf)[:0]
}

// uncork writes what was collected since cork in one write, and returns
// its error.
func (w *sockWriter) uncork() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.corked {
		return nil
	}
	w.corked = false
	b := w.buf
	w.buf = nil
	var err error
	if len(*b) > 0 {
		_, err = w.writeLocked(*b)
	}
	if cap(*b) <= maxPooledBatch {
		*b = (*b)[:0]
		batchBufs.Put(b)
	}
	return err
}

// abort fails the write in progress, if any, and every later one. It does
// not wait for the lock a write holds.
func (w *sockWriter) abort() {
	w.aborted.Store(true)
	_ = w.conn.SetWriteDeadline(time.Unix(1, 0))
}
