package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// meterBuffer is the size of a frameMeter's read buffer: the only read
// buffer a socket has (the library's bufio.Reader above it is the
// smallest bufio allows). Client messages are small; a large one takes a
// few more reads. On a connection that can wait for input without a
// buffer (see readable), the buffer is borrowed from meterBufs only while
// there are bytes to read: an idle socket holds none.
const meterBuffer = 1024

// meterBufs lends frameMeters their read buffers.
var meterBufs = sync.Pool{New: func() any {
	b := make([]byte, meterBuffer)
	return &b
}}

// frameMeter sits between a hijacked connection and coder/websocket and
// counts the frames the client sends as their bytes go past. Every frame
// (text, binary, continuation, ping, pong, close; of any size) takes a
// token from the socket's frame budget before the first byte of its header
// reaches the WebSocket library. The library answers pings and skips
// continuation frames inside its own reader, out of the server's sight;
// counting below it is the only way to bound that work. When the budget is
// spent, Read waits on the clock: the library reads nothing further from
// that socket, the kernel's buffers fill, and the client is slowed down.
// Nothing is refused and nothing is answered.
//
// Read must not be called concurrently (the library has one reader at a
// time); Close may be called at any time and ends a wait.
type frameMeter struct {
	net.Conn
	budget    limiter
	throttled func() // called before each wait

	stop     chan struct{}
	stopOnce sync.Once
	// unmasked is set at the first frame without a masking key: every
	// client frame must have one (RFC 6455, section 5.1). The library
	// refuses such a frame without a close frame; the server closes with
	// a protocol error (1002) when it sees this.
	unmasked atomic.Bool

	store []byte // backing array of buf
	// lent is store when it is borrowed from meterBufs; wait, if set,
	// waits until the connection has input, without a buffer (see
	// readable): store is then borrowed only while input is buffered.
	lent    *[]byte
	wait    func() error
	buf     []byte // read from Conn, not yet returned
	ok      int    // buf[:ok] may be returned: their frames were counted
	payload int64  // payload bytes of the current frame not yet in buf[:ok]
}

func newFrameMeter(conn net.Conn, buffered []byte, budget limiter, throttled func()) *frameMeter {
	m := &frameMeter{Conn: conn, budget: budget, throttled: throttled, stop: make(chan struct{})}
	m.wait = readable(conn)
	switch {
	case len(buffered) > meterBuffer:
		m.store = make([]byte, 0, len(buffered))
	case len(buffered) > 0 || m.wait == nil:
		m.borrow()
	}
	m.buf = append(m.store[:0], buffered...)
	return m
}

// borrow gives the meter a read buffer, from meterBufs.
func (m *frameMeter) borrow() {
	m.lent = meterBufs.Get().(*[]byte)
	m.store = (*m.lent)[:0]
}

// release gives a borrowed buffer back; buf is empty.
func (m *frameMeter) release() {
	if m.lent != nil {
		meterBufs.Put(m.lent)
		m.lent = nil
	}
	m.store, m.buf = nil, nil
}

// Read returns bytes whose frames were counted, reading and counting more
// as needed.
func (m *frameMeter) Read(p []byte) (int, error) {
	for {
		if m.ok > 0 {
			n := copy(p, m.buf[:m.ok])
			m.buf = m.buf[n:]
			m.ok -= n
			if len(m.buf) == 0 && m.wait != nil {
				m.release() // all handed over: the next read borrows again
			}
			return n, nil
		}
		if err := m.scan(); err != nil {
			return 0, err
		}
		if m.ok > 0 {
			continue
		}
		// What is left is the start of a frame header: read more.
		if len(m.buf) == 0 {
			if m.wait != nil {
				// Nothing buffered: wait for input without a buffer.
				m.release()
				if err := m.wait(); err != nil {
					return 0, err
				}
				m.borrow()
			}
			m.buf = m.store[:0]
		} else if cap(m.buf)-len(m.buf) < meterBuffer/2 {
			m.buf = append(m.store[:0], m.buf...)
		}
		n, err := m.Conn.Read(m.buf[len(m.buf):cap(m.buf)])
		m.buf = m.buf[:len(m.buf)+n]
		if n == 0 && err != nil {
			return 0, err
		}
	}
}

// scan moves ok over the buffered bytes as far as the budget allows: a
// payload needs nothing, a frame header needs a token. It waits for a
// token only when nothing counted is left to return first.
func (m *frameMeter) scan() error {
	for m.ok < len(m.buf) {
		if m.payload > 0 {
			n := int(min(int64(len(m.buf)-m.ok), m.payload))
			m.ok += n
			m.payload -= int64(n)
			continue
		}
		hlen, plen, complete := frameHeader(m.buf[m.ok:])
		if !complete {
			return nil
		}
		if m.buf[m.ok+1]&0x80 == 0 {
			m.unmasked.Store(true)
		}
		if !m.budget.allow() {
			if m.ok > 0 {
				return nil
			}
			m.throttled()
			if err := m.budget.wait(m.stop); err != nil {
				return err
			}
		}
		m.ok += hlen
		m.payload = plen
	}
	return nil
}

// Close closes the connection and ends a wait in Read.
func (m *frameMeter) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	return m.Conn.Close()
}

// frameHeader parses the header at the start of b (RFC 6455, section
// 5.2): its length and the payload length that follows. complete is false
// if b does not hold the whole header yet. Nothing is validated; the
// WebSocket library does that.
func frameHeader(b []byte) (hlen int, payload int64, complete bool) {
	if len(b) < 2 {
		return 0, 0, false
	}
	hlen = 2
	payload = int64(b[1] & 0x7F)
	switch payload {
	case 126:
		hlen += 2
	case 127:
		hlen += 8
	}
	if b[1]&0x80 != 0 {
		hlen += 4 // masking key
	}
	if len(b) < hlen {
		return 0, 0, false
	}
	switch payload {
	case 126:
		payload = int64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		payload = int64(min(binary.BigEndian.Uint64(b[2:10]), math.MaxInt64))
	}
	return hlen, payload, true
}

// upgradeWriter is the ResponseWriter given to websocket.Accept. When
// Accept is about to answer 101 Switching Protocols, beforeUpgrade runs
// first (the lobby join, so that a client whose upgrade completed is in the
// lobby). The connection Accept hijacks is wrapped in a frameMeter for
// reading and a sockWriter for writing, and the library gets bufio buffers
// of the smallest useful sizes in place of net/http's 4 KiB ones: the
// meter's buffer is the read buffer, and writes are batched below (see
// sockWriter).
type upgradeWriter struct {
	http.ResponseWriter
	beforeUpgrade func()
	meter         func(conn net.Conn, buffered []byte) *frameMeter
	writeTimeout  time.Duration

	upgrading bool
	switching bool        // the 101 is to be written by Hijack
	conn      *frameMeter // the hijacked connection, once hijacked
	out       *sockWriter // its write side
}

// libraryWriteBuffer holds any control frame whole (header and a payload
// of at most 125 bytes), so that one the library writes outside a batch
// is one write.
const libraryWriteBuffer = 256

func (w *upgradeWriter) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols && !w.upgrading {
		w.upgrading = true
		w.beforeUpgrade()
		// Hijack writes the 101 itself, into the socket's first batch:
		// the answer and the socket's first messages are one write.
		w.switching = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *upgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	// Bytes the HTTP server read past the request (frames a client sent
	// without waiting for the 101) are counted like the rest.
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	w.conn = w.meter(conn, buffered)
	w.out = newSockWriter(conn, w.writeTimeout)
	if w.switching {
		// Corked until the writer's first batch (or its close) sends it.
		w.out.cork()
		_, _ = w.out.Write([]byte("HTTP/1.1 101 Switching Protocols\r\n"))
		_ = w.Header().Write(w.out)
		_, _ = w.out.Write([]byte("\r\n"))
	}
	return w.conn, bufio.NewReadWriter(bufio.NewReaderSize(bytes.NewReader(nil), 16), bufio.NewWriterSize(w.out, libraryWriteBuffer)), nil
}
