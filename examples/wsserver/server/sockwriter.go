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
// collects everything the library writes and uncork sends it in one
// (vectored) write: a batch of queued messages costs one system call, not
// one per message. Outside a cork, writes go straight to the connection.
// Writes from the library's other users (a pong or a close frame answered
// by the reader) are serialised with the batch in order. Every write to
// the connection has a deadline of timeout on the real clock; abort makes
// the one in progress, and all later ones, fail.
//
// What is collected is not all copied. A message's payload is shared by
// every socket it goes to (one encoding per room, one chat history for all
// joiners), and the library hands a large payload to its writer as it is,
// after the frame header and the first bytes it buffered: while corked, a
// Write of the tail of the payload named by share is kept by reference,
// and only the small pieces that come from the library's own buffer (frame
// headers, the head of a payload, small messages, control frames) are
// copied. So a batch costs its socket at most about libraryWriteBuffer
// bytes per message, whatever the messages' size.
type sockWriter struct {
	conn    net.Conn
	timeout time.Duration
	aborted atomic.Bool

	mu     sync.Mutex
	corked bool
	buf    *[]byte // copied bytes, borrowed from batchBufs while corked
	segs   []segment
	// shared is the immutable payload being written (see share): a
	// Write that is its tail is kept by reference.
	shared []byte
}

// segment is one piece of a batch: a shared payload's tail (ref) or the
// copied bytes buf[from:to].
type segment struct {
	ref      []byte
	from, to int
}

// batchBufs lends the buffers the copied bytes of batches are collected
// in.
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

// share names the payload about to be written, or nil after it: until the
// next share, a corked Write that is a tail of p is kept by reference
// rather than copied. p must not change until the batch is uncorked.
func (w *sockWriter) share(p []byte) {
	w.mu.Lock()
	w.shared = p
	w.mu.Unlock()
}

// isTail reports whether p is a non-empty tail of s: the same memory, not
// a copy.
func isTail(p, s []byte) bool {
	return len(p) > 0 && len(p) <= len(s) && &p[len(p)-1] == &s[len(s)-1]
}

// Write collects p while corked and writes it to the connection otherwise.
func (w *sockWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.corked {
		return w.writeLocked(p)
	}
	if isTail(p, w.shared) {
		w.segs = append(w.segs, segment{ref: p})
		return len(p), nil
	}
	from := len(*w.buf)
	*w.buf = append(*w.buf, p...)
	if n := len(w.segs); n > 0 && w.segs[n-1].ref == nil && w.segs[n-1].to == from {
		w.segs[n-1].to = len(*w.buf)
	} else {
		w.segs = append(w.segs, segment{from: from, to: len(*w.buf)})
	}
	return len(p), nil
}

// deadlineLocked sets the write deadline of the next write, and fails if
// the writer was aborted.
func (w *sockWriter) deadlineLocked() error {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	// Checked after the deadline is set: an abort that raced with it has
	// either set its past deadline after ours or is seen here.
	if w.aborted.Load() {
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (w *sockWriter) writeLocked(p []byte) (int, error) {
	if err := w.deadlineLocked(); err != nil {
		return 0, err
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
	b, segs := w.buf, w.segs
	w.buf = nil
	var err error
	switch {
	case len(segs) == 0:
	case len(segs) == 1 && segs[0].ref == nil:
		_, err = w.writeLocked(*b)
	default:
		if err = w.deadlineLocked(); err == nil {
			bufs := make(net.Buffers, len(segs))
			for i, s := range segs {
				if s.ref != nil {
					bufs[i] = s.ref
				} else {
					bufs[i] = (*b)[s.from:s.to]
				}
			}
			// On a TCP connection, one writev.
			_, err = bufs.WriteTo(w.conn)
		}
	}
	clear(segs)
	w.segs = segs[:0]
	if cap(segs) > 16 {
		w.segs = nil // an idle socket keeps no large slice
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
