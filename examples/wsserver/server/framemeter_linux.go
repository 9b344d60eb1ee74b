package server

import (
	"errors"
	"net"
	"syscall"
)

// readable returns a function that waits until conn has input (bytes, its
// end or an error) without reading any, or nil if conn cannot. It asks
// the kernel with a non-blocking MSG_PEEK of one byte and, while there is
// nothing, waits in the runtime's poller like a Read would, read
// deadlines included.
func readable(conn net.Conn) func() error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var peek [1]byte
	ready := func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR)
	}
	return func() error { return raw.Read(ready) }
}
