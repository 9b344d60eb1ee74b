package server_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawSocket is a WebSocket client that writes frames byte by byte, for the
// floods no well-behaved library sends: ping storms, messages that never
// end. It speaks just enough RFC 6455 for that.
type rawSocket struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// Frame opcodes (RFC 6455, section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// dialRawSocket performs the opening handshake on path by hand and fails
// the test unless the server answers 101.
func (e *env) dialRawSocket(path string) *rawSocket {
	e.t.Helper()
	u, err := url.Parse(e.ts.URL)
	if err != nil {
		e.t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, waitLimit)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { conn.Close() })
	var key [16]byte
	_, _ = rand.Read(key[:])
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, u.Host, base64.StdEncoding.EncodeToString(key[:]))
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		e.t.Fatalf("handshake: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		e.t.Fatalf("handshake: status %d, want 101", resp.StatusCode)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return &rawSocket{t: e.t, conn: conn, br: br}
}

// frame encodes one masked client frame.
func clientFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xFFFF:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	out = append(out, mask[:]...)
	for i, c := range payload {
		out = append(out, c^mask[i%4])
	}
	return out
}

// write sends raw bytes, failing the test if the socket refuses them.
func (r *rawSocket) write(b []byte) {
	r.t.Helper()
	_ = r.conn.SetWriteDeadline(time.Now().Add(waitLimit))
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

// serverFrame is one frame from the server (never masked, never
// fragmented by this server).
type serverFrame struct {
	op      byte
	payload []byte
}

// readFrame reads the next frame; an error means the connection ended.
func (r *rawSocket) readFrame() (serverFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return serverFrame{}, err
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r.br, ext[:]); err != nil {
			return serverFrame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r.br, ext[:]); err != nil {
			return serverFrame{}, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 1<<20 {
		return serverFrame{}, fmt.Errorf("server frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r.br, p); err != nil {
		return serverFrame{}, err
	}
	return serverFrame{op: h[0] & 0x0F, payload: p}, nil
}

// frames reads frames in the background and sends them on the returned
// channel, which is closed when the connection ends.
func (r *rawSocket) frames() <-chan serverFrame {
	ch := make(chan serverFrame, 4096)
	go func() {
		defer close(ch)
		for {
			f, err := r.readFrame()
			if err != nil {
				return
			}
			ch <- f
		}
	}()
	return ch
}

// metricValue returns the value of the sample whose line starts with name
// (labels included) on /metrics, or -1 if there is none.
func (e *env) metricValue(name string) float64 {
	e.t.Helper()
	_, body := e.get("/metrics", nil)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

// waitMetric polls /metrics until the sample reaches at least want.
func (e *env) waitMetric(name string, want float64) {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for e.metricValue(name) < want {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s did not reach %v within %v (now %v)", name, want, waitLimit, e.metricValue(name))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
