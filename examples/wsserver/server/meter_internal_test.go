package server

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// maskedFrame encodes one masked client frame.
func maskedFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	default:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	}
	out = append(out, 1, 2, 3, 4)
	for i, c := range payload {
		out = append(out, c^[]byte{1, 2, 3, 4}[i%4])
	}
	return out
}

// The meter hands over every byte it reads, in order, however the frames
// are cut into reads; with the budget spent it holds back the next frame
// until the clock refills it, and hands over the frames counted before.
func TestFrameMeterPassesBytesAndThrottles(t *testing.T) {
	frames := [][]byte{
		maskedFrame(true, 0x1, []byte(`{"type":"ping"}`)),
		maskedFrame(true, 0x9, nil),
		maskedFrame(false, 0x1, bytes.Repeat([]byte("x"), 300)),
		maskedFrame(false, 0x0, nil),
		maskedFrame(true, 0x0, []byte("end")),
	}
	clock := clockwork.NewFakeClock()
	client, srv := net.Pipe()
	defer client.Close()
	throttled := 0
	all := bytes.Join(frames, nil)
	// The first bytes were read by the HTTP server before the hijack.
	m := newFrameMeter(srv, all[:3], newLimiter(clock, 1, 3), func() { throttled++ })
	defer m.Close()
	go func() {
		// The rest in small pieces.
		rest := all[3:]
		for len(rest) > 0 {
			n := min(7, len(rest))
			if _, err := client.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
	}()
	want := len(frames[0]) + len(frames[1]) + len(frames[2]) // the burst: three frames
	got := make([]byte, 0, len(all))
	buf := make([]byte, 5)
	for len(got) < want {
		n, err := m.Read(buf)
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if len(got) != want {
		t.Fatalf("read %d bytes with a burst of 3 frames, want %d", len(got), want)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < len(all) {
			n, err := m.Read(buf)
			if err != nil {
				return
			}
			got = append(got, buf[:n]...)
		}
	}()
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the last frames were not read after the clock refilled the budget (%d of %d bytes)", len(got), len(all))
	}
	if !bytes.Equal(got, all) {
		t.Fatalf("bytes through the meter differ from the bytes sent")
	}
	if throttled != 1 {
		t.Errorf("throttled %d times, want 1", throttled)
	}
}
