package server_test

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkBurst: the hosts of many rooms of four drop at the same instant
// (a network blip), and every room must show its successor. One op is one
// burst: from the drops until the last remaining socket of the last room
// has the new host, with the grace passed on the fake clock as soon as
// every room shows its host reconnecting; so the time is the server's
// work (noticing the drops, the disconnect commits and their fan-out, the
// expiries and theirs), without the grace itself. Joining the rooms is not
// timed. Reported beside ns/op: ms-offline, the drops until every room
// shows its host reconnecting, and ms-successor, the grace's end until
// every room shows the successor, and cpu-µs/room, the process's CPU time
// (user and system) during the burst per room. allocs/op and cpu-µs/room
// count the whole process, the benchmark's 3×rooms reading clients
// included; on a shared machine the CPU figure is the steadier of the
// times.
func BenchmarkBurst(b *testing.B) {
	for _, rooms := range []int{64, 512} {
		for _, drop := range []string{"fin", "rst", "handshake"} {
			b.Run(fmt.Sprintf("rooms=%d/drop=%s", rooms, drop), func(b *testing.B) {
				benchBurst(b, rooms, drop)
			})
		}
	}
}

func benchBurst(b *testing.B, n int, drop string) {
	bs := newBenchServer(b)
	grace := testPolicy().Grace
	var offline, successor, cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		hosts := make([]*benchSocket, n)
		rest := make([]*benchSocket, 0, 3*n)
		for r := range n {
			room := fmt.Sprintf("burst-%d-%d", i, r)
			socks := make([]*benchSocket, 4)
			for j := range socks {
				socks[j] = bs.join(b, room, fmt.Sprintf("p%d", j))
			}
			for _, s := range socks {
				s.waitFor(b, func(rev uint64, _ string) bool { return rev >= 4 })
			}
			hosts[r] = socks[0]
			rest = append(rest, socks[1:]...)
		}
		if drop == "rst" {
			for _, h := range hosts {
				if err := h.tcp.SetLinger(0); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		cpu0 := processCPU(b)
		start := time.Now()
		var wg sync.WaitGroup
		switch drop {
		case "handshake":
			// Each close waits for the server's answer: all at once.
			for _, h := range hosts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = h.conn.Close(websocket.StatusNormalClosure, "")
				}()
			}
		default:
			// A TCP close (FIN, or RST after SetLinger(0)), no close frame.
			for _, h := range hosts {
				_ = h.tcp.Close()
			}
		}
		for _, s := range rest {
			s.mu.Lock()
			for !s.away {
				if s.err != nil {
					b.Fatalf("socket ended: %v", s.err)
				}
				s.cond.Wait()
			}
			s.mu.Unlock()
		}
		shown := time.Now()
		offline += shown.Sub(start)
		bs.clock.Advance(grace)
		for _, s := range rest {
			for !s.poll(func(_ uint64, host string) bool { return host == "p1" }, 5*time.Millisecond) {
				// The sweeper armed its next wake-up after the advance.
				bs.clock.Advance(10 * time.Millisecond)
			}
		}
		successor += time.Since(shown)
		cpu += processCPU(b) - cpu0
		b.StopTimer()
		wg.Wait()
		for _, s := range rest {
			s.close()
		}
		for _, h := range hosts {
			h.close()
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(offline.Microseconds())/1e3/float64(b.N), "ms-offline")
	b.ReportMetric(float64(successor.Microseconds())/1e3/float64(b.N), "ms-successor")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/room")
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
