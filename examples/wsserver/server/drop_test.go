package server_test

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A client whose TCP connection ends without a close frame (it closed its
// end, or the network reset it) is gone: the server tells the lobby, which
// shows the member reconnecting to the others, and closes the connection
// without writing a close frame, or anything else, into it.
func TestDroppedSocketIsClosedWithoutCloseFrame(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	alice.waitState("alice joined", func(m msg) bool { return hasMember(m, "alice", "online") })
	raw := e.dialRawSocket("/ws?ticket=" + url.QueryEscape(e.ticket("r", "bob")))
	frames := raw.frames()
	deadline := time.After(waitLimit)
	// Bob's first lobby.state: his join is done and the socket served.
	for joined := false; !joined; {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("connection ended before bob's first state")
			}
			joined = f.op == opText && strings.Contains(string(f.payload), `"lobby.state"`)
		case <-deadline:
			t.Fatalf("no lobby.state for bob within %v", waitLimit)
		}
	}
	alice.waitState("bob online", func(m msg) bool { return hasMember(m, "bob", "online") })
	// FIN, no close frame; the read side stays open to see what comes.
	if err := raw.conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	alice.waitState("bob reconnecting", func(m msg) bool { return hasMember(m, "bob", "reconnecting") })
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return // closed, and nothing after the drop was a close frame
			}
			if f.op == opClose {
				t.Fatalf("the server wrote a close frame (%q) into a connection its client had dropped", f.payload)
			}
		case <-deadline:
			t.Fatalf("the server did not close the dropped connection within %v", waitLimit)
		}
	}
}
