package server

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// On a TCP connection the meter borrows its read buffer only while it has
// bytes to hand over: once a read has taken everything, it holds none, and
// the next read still gets the next frame whole. A connection that cannot
// wait without a buffer (net.Pipe) keeps one.
func TestFrameMeterHoldsNoBufferWhenIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	m := newFrameMeter(conn, nil, newLimiter(clockwork.NewFakeClock(), 100, 100), func() {})
	defer m.Close()
	if m.store != nil || m.lent != nil {
		t.Fatal("a new meter on a TCP connection holds a read buffer before any input")
	}
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for i, payload := range []string{`{"type":"ping"}`, `{"type":"heartbeat"}`} {
		frame := maskedFrame(true, 0x1, []byte(payload))
		if _, err := client.Write(frame); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 0, len(frame))
		for len(got) < len(frame) {
			p := make([]byte, 64)
			n, err := m.Read(p)
			if err != nil {
				t.Fatalf("frame %d: read: %v", i, err)
			}
			got = append(got, p[:n]...)
		}
		if !bytes.Equal(got, frame) {
			t.Fatalf("frame %d: read %x, want %x", i, got, frame)
		}
		if m.store != nil || m.lent != nil {
			t.Fatalf("frame %d: the meter still holds its read buffer with nothing left to hand over", i)
		}
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if p := newFrameMeter(b, nil, newLimiter(clockwork.NewFakeClock(), 100, 100), func() {}); p.store == nil {
		t.Fatal("a meter on a connection it cannot wait on without a buffer has none")
	}
}
