package load

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClockTicks is the unit of utime and stime in /proc/PID/stat (USER_HZ),
// read once with `getconf CLK_TCK`; 100, the value on every mainstream
// Linux architecture, if that fails.
var ClockTicks = sync.OnceValue(func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
})

// ParseStatCPU returns utime+stime, in clock ticks, from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may hold
// spaces and parentheses itself, so fields are counted from the last ')'.
func ParseStatCPU(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %.40q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: utime %q stime %q", f[11], f[12])
	}
	return utime + stime, nil
}

// ParseStatusKB returns the value of a "Name:   1234 kB" line (VmRSS,
// VmHWM) of /proc/PID/status, in KiB.
func ParseStatusKB(status io.Reader, name string) (uint64, error) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: %s is %q, want a number of kB", name, v)
		}
		return strconv.ParseUint(f[0], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("proc status: no %s line", name)
}

// ProcCPU returns the CPU time process pid has used so far (user + system).
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := ParseStatCPU(string(b))
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ticks) / ClockTicks() * float64(time.Second)), nil
}

// ProcMemKB returns a VmRSS/VmHWM-style figure of process pid, in KiB.
func ProcMemKB(pid int, name string) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return ParseStatusKB(f, name)
}

// RSSSample is the resident set of the watched processes together at a time
// since the start of the run.
type RSSSample struct {
	Seconds float64 `json:"t"`
	MB      float64 `json:"mb"`
}

// rssSampler reads VmRSS of pids every interval until stopped.
type rssSampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples []RSSSample
}

// sampleRSS starts sampling; stop it with (*rssSampler).finish.
func sampleRSS(pids []int, start time.Time, every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			var kb uint64
			for _, pid := range pids {
				v, _ := ProcMemKB(pid, "VmRSS") // a process gone counts 0
				kb += v
			}
			s.samples = append(s.samples, RSSSample{Seconds: time.Since(start).Seconds(), MB: float64(kb) / 1024})
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns its samples.
func (s *rssSampler) finish() []RSSSample {
	close(s.stop)
	<-s.done
	return s.samples
}

// ServerResources are the watched server processes' CPU and memory over a
// run, summed over the processes.
type ServerResources struct {
	PIDs []int `json:"pids"`
	// ClockTicks is the /proc tick rate used (USER_HZ).
	ClockTicks float64 `json:"clockTicks"`
	// CPUSeconds is user+system CPU from before the joins until the
	// failovers settled; CPUPerPlayerUs divides it by the players joined.
	CPUSeconds     float64 `json:"cpuSeconds"`
	CPUPerPlayerUs float64 `json:"cpuPerPlayerUs"`
	// PeakRSSMB is VmHWM (the resident set's high-water mark since the
	// process started) at the end; PeakRSSPerSocketKB divides it by the
	// sockets the run opened.
	PeakRSSMB          float64 `json:"peakRssMB"`
	Sockets            int     `json:"sockets"`
	PeakRSSPerSocketKB float64 `json:"peakRssPerSocketKB"`
	// RSS is VmRSS sampled every RSSInterval.
	RSS    []RSSSample `json:"rss"`
	Errors []string    `json:"errors,omitempty"`
}

// RSSInterval is how often the server's resident set is sampled.
const RSSInterval = 100 * time.Millisecond

// resourceProbe measures server processes from its start to finish.
type resourceProbe struct {
	pids []int
	cpu0 []time.Duration
	errs []string
	rss  *rssSampler
}

// startProbe reads the processes' CPU time and starts sampling their RSS.
func startProbe(pids []int, start time.Time) *resourceProbe {
	p := &resourceProbe{pids: pids, cpu0: make([]time.Duration, len(pids))}
	for i, pid := range pids {
		var err error
		if p.cpu0[i], err = ProcCPU(pid); err != nil {
			p.errs = append(p.errs, err.Error())
		}
	}
	p.rss = sampleRSS(pids, start, RSSInterval)
	return p
}

// finish stops sampling and reads the CPU used since the start and the
// peak resident sets.
func (p *resourceProbe) finish() *ServerResources {
	r := &ServerResources{PIDs: p.pids, ClockTicks: ClockTicks(), RSS: p.rss.finish(), Errors: p.errs}
	for i, pid := range p.pids {
		cpu, err := ProcCPU(pid)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		r.CPUSeconds += (cpu - p.cpu0[i]).Seconds()
		hwm, err := ProcMemKB(pid, "VmHWM")
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		r.PeakRSSMB += float64(hwm) / 1024
	}
	return r
}

// perPlayer fills in the figures per player and per socket.
func (r *ServerResources) perPlayer(players int) {
	r.Sockets = players
	r.CPUPerPlayerUs = r.CPUSeconds * 1e6 / float64(players)
	r.PeakRSSPerSocketKB = r.PeakRSSMB * 1024 / float64(players)
}

// cpu returns the CPU time the probed processes have used so far; a process
// that cannot be read counts 0 (finish reports the error).
func (p *resourceProbe) cpu() time.Duration {
	var sum time.Duration
	for _, pid := range p.pids {
		c, _ := ProcCPU(pid)
		sum += c
	}
	return sum
}

// Phase is one phase of a run: its wall time and the CPU time used in it by
// the load generator itself and, if probed, by the servers. A generator
// near one CPU-second per second was itself a bottleneck.
type Phase struct {
	WallSeconds      float64 `json:"wallSeconds"`
	ToolCPUSeconds   float64 `json:"toolCpuSeconds"`
	ServerCPUSeconds float64 `json:"serverCpuSeconds,omitempty"`
}

// phaseClock measures a Phase from its start.
type phaseClock struct {
	start        time.Time
	tool, server time.Duration
	probe        *resourceProbe
}

func startPhase(probe *resourceProbe) phaseClock {
	c := phaseClock{start: time.Now(), probe: probe}
	c.tool, _ = ProcCPU(os.Getpid())
	if probe != nil {
		c.server = probe.cpu()
	}
	return c
}

func (c phaseClock) end() Phase {
	ph := Phase{WallSeconds: time.Since(c.start).Seconds()}
	if tool, err := ProcCPU(os.Getpid()); err == nil {
		ph.ToolCPUSeconds = (tool - c.tool).Seconds()
	}
	if c.probe != nil {
		ph.ServerCPUSeconds = (c.probe.cpu() - c.server).Seconds()
	}
	return ph
}
