package server_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// pageProxy is a TCP proxy between one browser page and the server: the
// page loads from the proxy's address, so its ticket requests and its
// sockets go through it. On WebSocket connections it reads the server's
// frames (unmasked, uncompressed: the server does not negotiate
// compression) and can drop one lobby.state, replay an old one, cut a
// frame in the middle and kill the connection, or refuse new connections,
// as a broken network or a misbehaving middlebox would.
type pageProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu       sync.Mutex
	refusing bool
	drop     map[uint64]bool   // lobby.state versions not passed on
	replay   map[uint64]uint64 // after passing version k on, send version v's frame again
	frames   map[uint64][]byte // every lobby.state frame seen, by version
	cutNext  bool              // the next text frame: half of it, then the connection dies
	cuts     int               // connections killed mid-frame
	sockets  int               // WebSocket connections opened through the proxy
	open     map[net.Conn]net.Conn
	accepted sync.WaitGroup
}

func newPageProxy(t *testing.T) *pageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pageProxy{t: t, ln: ln, drop: map[uint64]bool{}, replay: map[uint64]uint64{},
		frames: map[uint64][]byte{}, open: map[net.Conn]net.Conn{}}
	t.Cleanup(func() {
		ln.Close()
		p.kill()
		p.accepted.Wait()
	})
	return p
}

// URL is the page's base URL through the proxy.
func (p *pageProxy) URL() string { return "http://" + p.ln.Addr().String() }

// start forwards to target (host:port) until the test ends.
func (p *pageProxy) start(target string) {
	p.target = target
	p.accepted.Add(1)
	go func() {
		defer p.accepted.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go func() {
				defer p.accepted.Done()
				p.serve(c)
			}()
		}
	}()
}

func (p *pageProxy) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// kill closes every WebSocket connection through the proxy, both sides,
// without a close frame: the page and the server each see the network go.
func (p *pageProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, b := range p.open {
		a.Close()
		b.Close()
	}
}

func (p *pageProxy) serve(client net.Conn) {
	defer client.Close()
	p.mu.Lock()
	refusing := p.refusing
	p.mu.Unlock()
	if refusing {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	// The request tells a WebSocket connection from a plain one: browsers
	// open a connection of its own for each socket.
	cr := bufio.NewReader(client)
	head, err := cr.Peek(1)
	if err != nil || len(head) == 0 {
		return
	}
	var req bytes.Buffer
	for {
		line, err := cr.ReadString('\n')
		req.WriteString(line)
		if err != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	ws := strings.Contains(strings.ToLower(req.String()), "upgrade: websocket")
	if _, err := server.Write(req.Bytes()); err != nil {
		return
	}
	go func() {
		io.Copy(server, cr)
		server.Close()
	}()
	if !ws {
		io.Copy(client, server)
		return
	}
	p.mu.Lock()
	p.sockets++
	p.open[client] = server
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.open, client)
		p.mu.Unlock()
	}()
	p.relayFrames(client, bufio.NewReader(server))
}

// relayFrames passes the server's answer and then its frames on to the
// page, applying the proxy's rules to lobby.state frames.
func (p *pageProxy) relayFrames(client net.Conn, sr *bufio.Reader) {
	for {
		line, err := sr.ReadString('\n')
		if _, werr := client.Write([]byte(line)); err != nil || werr != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	for {
		frame, opcode, payload, err := readServerFrame(sr)
		if err != nil {
			return
		}
		var out [][]byte
		p.mu.Lock()
		cut := p.cutNext && opcode == 1
		var version uint64
		isState := false
		if opcode == 1 {
			var m struct {
				Type    string `json:"type"`
				Version uint64 `json:"version"`
			}
			if json.Unmarshal(payload, &m) == nil && m.Type == "lobby.state" {
				isState, version = true, m.Version
				p.frames[version] = frame
			}
		}
		switch {
		case cut:
			p.cutNext = false
			p.cuts++
		case isState && p.drop[version]:
			delete(p.drop, version)
		default:
			out = append(out, frame)
			if v, ok := p.replay[version]; ok && isState {
				delete(p.replay, version)
				if old, ok := p.frames[v]; ok {
					out = append(out, old)
				}
			}
		}
		p.mu.Unlock()
		if cut {
			// Half the frame, then the connection dies under it.
			client.Write(frame[:len(frame)/2])
			client.Close()
			return
		}
		for _, f := range out {
			if _, err := client.Write(f); err != nil {
				return
			}
		}
	}
}

// readServerFrame reads one unmasked WebSocket frame and returns it whole,
// with its opcode and payload.
func readServerFrame(r *bufio.Reader) (frame []byte, opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return nil, 0, nil, err
	}
	frame = append(frame, h[:]...)
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return nil, 0, nil, err
		}
		frame = append(frame, b[:]...)
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return nil, 0, nil, err
		}
		frame = append(frame, b[:]...)
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<22 {
		return nil, 0, nil, io.ErrUnexpectedEOF
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(r, payload); err != nil {
		return nil, 0, nil, err
	}
	return append(frame, payload...), h[0] & 0x0f, payload, nil
}
