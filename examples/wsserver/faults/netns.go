package faults

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// netPrefix starts every namespace and link the harness makes, followed by
// the pid of the process that made it, so that leftovers of a crashed run
// can be told from those of a run still going.
const netPrefix = "lhf"

// ipCmd runs ip (or tc) with args and returns its combined output.
func ipCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Link is one veth pair between the root namespace and a server's.
type Link struct {
	ns       string
	Root     string // device name in the root namespace
	Peer     string // device name in the server's namespace
	RootAddr string // address of the root side
	PeerAddr string // address of the server side
}

// Net is the namespaces and links of one run.
type Net struct {
	pid    int
	subnet string // first three octets of the run's /24
	NS     []string
	Client []Link // per server: towards its clients
	Store  []Link // per server: towards the store
}

// CleanLeftovers deletes the namespaces that runs of the harness whose
// process is gone left behind (deleting a namespace deletes its veth
// pairs).
func CleanLeftovers() error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], netPrefix+"-") {
			continue
		}
		parts := strings.Split(f[0], "-")
		if len(parts) < 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		if pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			continue // a run still going
		}
		if err := ipCmd("ip", "netns", "del", f[0]); err != nil {
			return err
		}
	}
	return nil
}

// NewNet makes n namespaces, each with a client link and a store link, in
// a private /24 chosen from the pid (10.213.x.0/24). Each link is a /30:
// server i's client link is .8i+1 (root) and .8i+2 (server), its store
// link .8i+5 and .8i+6.
func NewNet(n int) (*Net, error) {
	if err := CleanLeftovers(); err != nil {
		return nil, err
	}
	pid := os.Getpid()
	nt := &Net{pid: pid, subnet: fmt.Sprintf("10.213.%d", 16+pid%200)}
	for i := range n {
		ns := fmt.Sprintf("%s-%d-s%d", netPrefix, pid, i)
		if err := ipCmd("ip", "netns", "add", ns); err != nil {
			nt.Close()
			return nil, err
		}
		nt.NS = append(nt.NS, ns)
		if err := ipCmd("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			nt.Close()
			return nil, err
		}
		for j, kind := range []string{"c", "s"} {
			l := Link{
				ns:       ns,
				Root:     fmt.Sprintf("lf%d%s%d", pid%10000000, kind, i),
				Peer:     fmt.Sprintf("lf%d%s%dp", pid%10000000, kind, i),
				RootAddr: fmt.Sprintf("%s.%d", nt.subnet, 8*i+4*j+1),
				PeerAddr: fmt.Sprintf("%s.%d", nt.subnet, 8*i+4*j+2),
			}
			steps := [][]string{
				{"ip", "link", "add", l.Root, "type", "veth", "peer", "name", l.Peer},
				{"ip", "link", "set", l.Peer, "netns", ns},
				{"ip", "addr", "add", l.RootAddr + "/30", "dev", l.Root},
				{"ip", "link", "set", l.Root, "up"},
				{"ip", "-n", ns, "addr", "add", l.PeerAddr + "/30", "dev", l.Peer},
				{"ip", "-n", ns, "link", "set", l.Peer, "up"},
			}
			for _, s := range steps {
				if err := ipCmd(s[0], s[1:]...); err != nil {
					nt.Close()
					return nil, err
				}
			}
			if kind == "c" {
				nt.Client = append(nt.Client, l)
			} else {
				nt.Store = append(nt.Store, l)
			}
		}
	}
	return nt, nil
}

// Close deletes the run's namespaces (and with them its links).
func (nt *Net) Close() error {
	var first error
	for _, ns := range nt.NS {
		if err := ipCmd("ip", "netns", "del", ns); err != nil && first == nil {
			first = err
		}
	}
	nt.NS = nil
	return first
}

// qdisc replaces the root qdisc of both ends of the link with args (none:
// back to the default).
func (l Link) qdisc(args ...string) error {
	_ = ipCmd("tc", "qdisc", "del", "dev", l.Root, "root")
	_ = ipCmd("ip", "netns", "exec", l.ns, "tc", "qdisc", "del", "dev", l.Peer, "root")
	if len(args) == 0 {
		return nil
	}
	if err := ipCmd("tc", append([]string{"qdisc", "add", "dev", l.Root, "root"}, args...)...); err != nil {
		return err
	}
	return ipCmd("ip", append([]string{"netns", "exec", l.ns, "tc", "qdisc", "add", "dev", l.Peer, "root"}, args...)...)
}

// netemMissing reports whether err says the kernel has no netem qdisc.
func netemMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "qdisc kind is unknown")
}

// Cut drops every packet on the link, both ways, silently (no reset, no
// unreachable: a partition). It uses netem (loss 100%) where the kernel
// has it, and otherwise a token bucket too small for any packet.
func (l Link) Cut() (string, error) {
	err := l.qdisc("netem", "loss", "100%")
	if !netemMissing(err) {
		return "netem loss 100%", err
	}
	return "tbf rate 8bit burst 32 (no netem in this kernel)", l.qdisc("tbf", "rate", "8bit", "burst", "32", "latency", "1ms")
}

// Degrade delays and drops packets on the link, both ways: netem delay
// 80±40 ms and 8% loss where the kernel has netem; otherwise a 32 kbit/s
// token bucket with a 300 ms queue, which delays every packet by its
// transmission time (tens to hundreds of ms) and drops what overflows.
func (l Link) Degrade() (string, error) {
	err := l.qdisc("netem", "delay", "80ms", "40ms", "loss", "8%")
	if !netemMissing(err) {
		return "netem delay 80ms ±40ms, loss 8%", err
	}
	return "tbf rate 32kbit burst 1600 latency 300ms (no netem in this kernel)", l.qdisc("tbf", "rate", "32kbit", "burst", "1600", "latency", "300ms")
}

// Heal removes whatever the link had.
func (l Link) Heal() error { return l.qdisc() }
