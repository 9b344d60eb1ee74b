package load

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// echoLateServer accepts one WebSocket and, when the client's close frame
// arrives, reports the instant on sawClose and withholds its own close
// frame until release is closed: a server slow to answer a close handshake.
func echoLateServer(t *testing.T, sawClose chan<- time.Time, release <-chan struct{}) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		for { // client frames: FIN/opcode, masked length, mask, payload
			var hdr [2]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return
			}
			n := uint64(hdr[1] & 0x7f)
			switch n {
			case 126:
				var ext [2]byte
				io.ReadFull(br, ext[:])
				n = uint64(binary.BigEndian.Uint16(ext[:]))
			case 127:
				var ext [8]byte
				io.ReadFull(br, ext[:])
				n = binary.BigEndian.Uint64(ext[:])
			}
			if _, err := io.CopyN(io.Discard, br, 4+int64(n)); err != nil {
				return
			}
			if hdr[0]&0x0f == 8 {
				sawClose <- time.Now()
				<-release
				c.Write([]byte{0x88, 0x02, 0x03, 0xe8}) // close, status 1000
				return
			}
		}
	}()
	return "http://" + ln.Addr().String()
}

// A handshake drop is timed from the client's close, before the close call:
// a server that holds back its answer to the close handshake has that wait
// counted in the failover delay, not hidden by a clock started at its echo.
func TestCloseClockStartsAtTheClientsClose(t *testing.T) {
	sawClose, release := make(chan time.Time, 1), make(chan struct{})
	base := echoLateServer(t, sawClose, release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, raw, err := newRawDialer().dial(ctx, base, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	r := &foRoom{id: "r", drop: DropHandshake, oldHost: "a", successor: "b", failedOver: make(chan struct{}), seen: map[*foPlayer]uint64{}}
	p := &foPlayer{room: r, user: "a", joined: true, conn: conn, raw: raw, full: make(chan struct{}),
		done: make(chan struct{}), hostAt: map[uint64]string{}}
	r.players = []*foPlayer{p}
	go p.read(2)

	closed := make(chan error, 1)
	go func() { closed <- closeHost(ctx, r, p) }()
	saw := <-sawClose
	select {
	case err := <-closed:
		t.Fatalf("the close returned (%v) before the server answered it", err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	echoed := time.Now()
	r.mu.Lock()
	closedAt := r.closedAt
	r.mu.Unlock()
	if !closedAt.Before(saw) {
		t.Fatalf("close stamped %v after the server saw the close frame; want before it", closedAt.Sub(saw))
	}
	// The new host shows up the grace after the echo: the delay holds the
	// whole wait for the echo.
	grace := 200 * time.Millisecond
	delay, noticed, expiry := split(closedAt, echoed, echoed.Add(grace), grace)
	if wait := echoed.Sub(saw); delay < wait || noticed < wait || expiry != 0 {
		t.Errorf("delay %v = %v + %v; want at least the %v the server withheld its echo, in the first part", delay, noticed, expiry, wait)
	}
}
