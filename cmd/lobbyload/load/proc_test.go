package load

import (
	"os"
	"strings"
	"testing"
)

// A command name with spaces and parentheses does not shift the fields.
func TestParseStatCPU(t *testing.T) {
	stat := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 1000 123456789 2500 18446744073709551615\n"
	got, err := ParseStatCPU(stat)
	if err != nil || got != 325 {
		t.Fatalf("ParseStatCPU = %d, %v; want 250+75 = 325", got, err)
	}
	for _, bad := range []string{"", "4242 no parens S 1 2", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 u s"} {
		if _, err := ParseStatCPU(bad); err == nil {
			t.Errorf("ParseStatCPU(%q): no error", bad)
		}
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tlobbyload\nVmPeak:\t  900 kB\nVmHWM:\t    5120 kB\nVmRSS:\t    4096 kB\n"
	for name, want := range map[string]uint64{"VmHWM": 5120, "VmRSS": 4096} {
		if got, err := ParseStatusKB(strings.NewReader(status), name); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", name, got, err, want)
		}
	}
	if _, err := ParseStatusKB(strings.NewReader(status), "VmSwap"); err == nil {
		t.Error("missing line: no error")
	}
	if _, err := ParseStatusKB(strings.NewReader("VmHWM:\t12 pages\n"), "VmHWM"); err == nil {
		t.Error("wrong unit: no error")
	}
}

// The test's own process has used some CPU and holds some memory, and its
// peak is at least its current resident set.
func TestProcOwnPID(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: not Linux")
	}
	pid := os.Getpid()
	x := 0
	for i := range 20_000_000 { // burn a few ticks
		x += i % 7
	}
	cpu, err := ProcCPU(pid)
	if err != nil || cpu <= 0 {
		t.Errorf("ProcCPU = %v, %v (x=%d)", cpu, err, x)
	}
	rss, err1 := ProcMemKB(pid, "VmRSS")
	hwm, err2 := ProcMemKB(pid, "VmHWM")
	if err1 != nil || err2 != nil || rss == 0 || hwm < rss {
		t.Errorf("VmRSS %d (%v), VmHWM %d (%v); want 0 < RSS <= HWM", rss, err1, hwm, err2)
	}
	if ClockTicks() <= 0 {
		t.Errorf("ClockTicks = %v", ClockTicks())
	}
}
