package server

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordingConn records each write that reaches the connection and the
// deadline it had.
type recordingConn struct {
	net.Conn
	writes    []string
	deadlines []time.Time
	deadline  time.Time
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return 0, os.ErrDeadlineExceeded
	}
	c.writes = append(c.writes, string(p))
	c.deadlines = append(c.deadlines, c.deadline)
	return len(p), nil
}

func (c *recordingConn) SetWriteDeadline(t time.Time) error {
	c.deadline = t
	return nil
}

// Between cork and uncork, writes are collected and reach the connection
// as one write; outside, each goes through at once; every write has a
// deadline; after abort nothing is written.
func TestSockWriterBatches(t *testing.T) {
	conn := &recordingConn{}
	w := newSockWriter(conn, time.Hour)
	start := time.Now()
	w.cork()
	for _, s := range []string{"one", "two", "three"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("corked Write(%q) = %d, %v", s, n, err)
		}
	}
	if len(conn.writes) != 0 {
		t.Fatalf("corked writes reached the connection: %q", conn.writes)
	}
	if err := w.uncork(); err != nil {
		t.Fatalf("uncork: %v", err)
	}
	if _, err := w.Write([]byte("pong")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.uncork(); err != nil { // not corked: nothing to do
		t.Fatalf("uncork without cork: %v", err)
	}
	w.cork()
	if err := w.uncork(); err != nil { // an empty batch writes nothing
		t.Fatalf("empty uncork: %v", err)
	}
	if diff := cmp.Diff([]string{"onetwothree", "pong"}, conn.writes); diff != "" {
		t.Errorf("connection writes (-want +got):\n%s", diff)
	}
	for i, d := range conn.deadlines {
		if d.Before(start.Add(time.Hour)) {
			t.Errorf("write %d had deadline %v, want at least an hour from the start", i, d)
		}
	}

	w.abort()
	if _, err := w.Write([]byte("late")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write after abort: %v, want a deadline error", err)
	}
	w.cork()
	_, _ = w.Write([]byte("late batch"))
	if err := w.uncork(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("uncork after abort: %v, want a deadline error", err)
	}
	if len(conn.writes) != 2 {
		t.Errorf("writes after abort reached the connection: %q", conn.writes[2:])
	}
}

// recordingSlices records the slices written to it, not copies of them.
type recordingSlices struct {
	net.Conn
	writes [][]byte
}

func (c *recordingSlices) Write(p []byte) (int, error) {
	c.writes = append(c.writes, p)
	return len(p), nil
}

func (c *recordingSlices) SetWriteDeadline(time.Time) error { return nil }
