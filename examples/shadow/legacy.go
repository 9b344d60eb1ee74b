package main

import "slices"

// naive is the legacy host logic the example replaces, as many game
// servers have it: the first close crowns the next socket. Sockets are kept
// in the order they connected; when the host's socket closes, the oldest
// remaining socket's player becomes host at once. It has no notion of
// heartbeats, so a socket that dies without a close stays forever.
type naive struct {
	socks    []uint64 // socket IDs, oldest first
	owner    map[uint64]string
	host     string
	hostSock uint64
}

func newNaive() *naive { return &naive{owner: map[uint64]string{}} }

func (n *naive) open(player string, sock uint64) {
	n.socks = append(n.socks, sock)
	n.owner[sock] = player
	if n.host == "" {
		n.host, n.hostSock = player, sock
	}
}

func (n *naive) close(sock uint64) {
	n.socks = slices.DeleteFunc(n.socks, func(s uint64) bool { return s == sock })
	delete(n.owner, sock)
	if sock == n.hostSock {
		n.crown()
	}
}

func (n *naive) leave(player string) {
	n.socks = slices.DeleteFunc(n.socks, func(s uint64) bool { return n.owner[s] == player })
	if player == n.host {
		n.crown()
	}
}

func (n *naive) crown() {
	n.host, n.hostSock = "", 0
	if len(n.socks) > 0 {
		n.host, n.hostSock = n.owner[n.socks[0]], n.socks[0]
	}
}
