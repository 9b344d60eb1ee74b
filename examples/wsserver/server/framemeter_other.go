//go:build !linux

package server

import "net"

// readable returns nil: off Linux, a frameMeter keeps its read buffer.
func readable(net.Conn) func() error { return nil }
