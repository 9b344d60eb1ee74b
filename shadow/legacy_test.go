package shadow_test

import "slices"

// naive is the legacy logic the tests compare against: the first close
// crowns the next socket. Sockets are kept in the order they connected;
// when the host's socket closes, the oldest remaining socket's player
// becomes host at once. It never times anything out.
type naive struct {
	socks   []sock
	host    string
	hostGen uint64
}

type sock struct {
	player string
	gen    uint64
}

func (n *naive) open(player string, gen uint64) {
	n.socks = append(n.socks, sock{player, gen})
	if n.host == "" {
		n.host, n.hostGen = player, gen
	}
}

func (n *naive) close(player string, gen uint64) {
	n.socks = slices.DeleteFunc(n.socks, func(s sock) bool { return s.gen == gen })
	if gen == n.hostGen {
		n.crown()
	}
}

func (n *naive) leave(player string) {
	n.socks = slices.DeleteFunc(n.socks, func(s sock) bool { return s.player == player })
	if player == n.host {
		n.crown()
	}
}

func (n *naive) crown() {
	n.host, n.hostGen = "", 0
	if len(n.socks) > 0 {
		n.host, n.hostGen = n.socks[0].player, n.socks[0].gen
	}
}
