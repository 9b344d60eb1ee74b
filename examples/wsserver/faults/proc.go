package faults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildServer builds the example server into dir and returns the binary's
// path.
func BuildServer(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "wsserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/lobbyhost/lobbyhost/examples/wsserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers, and
// bounded to its last max bytes.
type syncBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.max > 0 && s.b.Len() > 2*s.max {
		keep := s.b.Bytes()[s.b.Len()-s.max:]
		s.b = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is one server process in its namespace.
type Proc struct {
	Idx    int
	ns     string
	addr   string // listen address, on its client link
	bin    string
	args   []string
	Offset time.Duration

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	Stderr *syncBuffer
	paused bool
	down   bool // killed and not started again
}

// Base is the process's URL for clients.
func (p *Proc) Base() string { return "http://" + p.addr }

func (p *Proc) start() error {
	args := append([]string{"netns", "exec", p.ns, p.bin, "-addr", p.addr}, p.args...)
	if p.Offset != 0 {
		args = append(args, "-test-clock-offset", p.Offset.String())
	}
	cmd := exec.Command("ip", args...)
	cmd.Env = []string{"HOME=" + os.TempDir(), "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = dieWithHarness()
	stderr := p.Stderr
	if stderr == nil {
		stderr = &syncBuffer{max: 64 << 10}
	}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	line := make(chan error, 1)
	go func() {
		r := bufio.NewReader(out)
		_, err := r.ReadString('\n')
		line <- err
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case err = <-line:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("no URL printed within 30s")
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("process %d did not start: %v\n%s", p.Idx, err, tail(stderr.String(), 2000))
	}
	p.mu.Lock()
	p.cmd, p.exited, p.Stderr, p.paused, p.down = cmd, exited, stderr, false, false
	p.mu.Unlock()
	return nil
}

// dieWithHarness makes a child killed when the harness dies (a test
// timeout, an interrupt), so that no server outlives its run.
func dieWithHarness() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.down {
		return fmt.Errorf("process %d is not running", p.Idx)
	}
	return p.cmd.Process.Signal(sig)
}

// Pause stops the process (SIGSTOP); Resume continues it.
func (p *Proc) Pause() error {
	err := p.signal(syscall.SIGSTOP)
	if err == nil {
		p.mu.Lock()
		p.paused = true
		p.mu.Unlock()
	}
	return err
}

func (p *Proc) Resume() error {
	err := p.signal(syscall.SIGCONT)
	if err == nil {
		p.mu.Lock()
		p.paused = false
		p.mu.Unlock()
	}
	return err
}

// Kill kills the process with SIGKILL and waits for it to exit.
func (p *Proc) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.mu.Lock()
	exited := p.exited
	p.down = true
	p.mu.Unlock()
	<-exited
	return nil
}

// Up reports whether the process runs and is not paused.
func (p *Proc) Up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.down && !p.paused
}

// Stop ends the process: SIGCONT if paused, SIGTERM, then SIGKILL after
// wait.
func (p *Proc) Stop(wait time.Duration) {
	p.mu.Lock()
	cmd, exited, down := p.cmd, p.exited, p.down
	p.down = true
	p.mu.Unlock()
	if cmd == nil || down {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// healthy waits until /healthz answers 200.
func (p *Proc) healthy(ctx context.Context) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(p.Base() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not healthy within 20s: %v", p.Idx, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling a starting process
		}
	}
}

// redisServer is a Redis the harness starts itself, on a port of its own,
// with an append-only file synced on every write, so that a restart keeps
// its data.
type redisServer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	exit chan struct{}
}

func startRedis(dir string, port int) (*redisServer, error) {
	r := &redisServer{dir: dir, port: port}
	return r, r.start()
}

func (r *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *redisServer) start() error {
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--daemonize", "no", "--protected-mode", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = dieWithHarness()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	r.cmd, r.exit = cmd, make(chan struct{})
	go func(exit chan struct{}) { _ = cmd.Wait(); close(exit) }(r.exit)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("redis-cli", "-p", fmt.Sprint(r.port), "ping").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "PONG" {
			return nil
		}
		select {
		case <-r.exit:
			return fmt.Errorf("redis-server on port %d exited at start (port in use?)", r.port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d not answering: %s", r.port, out)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server
	}
}

// kill ends it with SIGKILL.
func (r *redisServer) kill() {
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		<-r.exit
		r.cmd = nil
	}
}
