//go:build bench && linux

package p2p

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux's
// USER_HZ, 100 clock ticks per second on every architecture Shoal runs on
// (sysconf(_SC_CLK_TCK) reports it; the kernel exports it as a fixed ABI
// value whatever its internal HZ).
const userHZ = 100

// procSample is a process's resource use at one moment.
type procSample struct {
	// CPUSeconds is the user plus system CPU time used so far.
	CPUSeconds float64
	// PeakRSSBytes is the peak resident set size (VmHWM).
	PeakRSSBytes int64
	// RSSBytes is the resident set size now (VmRSS).
	RSSBytes int64
}

// readProc samples process pid from /proc/<pid>/stat and
// /proc/<pid>/status.
func readProc(pid int) (procSample, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procSample{}, fmt.Errorf("sample process %d: %w", pid, err)
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return procSample{}, fmt.Errorf("sample process %d: %w", pid, err)
	}
	s, err := parseProc(stat, status)
	if err != nil {
		return procSample{}, fmt.Errorf("sample process %d: %w", pid, err)
	}
	return s, nil
}

// readProcSelf samples the benchmark's own process (where the registry
// runs).
func readProcSelf() (procSample, error) {
	return readProc(os.Getpid())
}

// parseProc parses the contents of /proc/<pid>/stat and
// /proc/<pid>/status.
func parseProc(stat, status []byte) (procSample, error) {
	cpu, err := parseProcStat(stat)
	if err != nil {
		return procSample{}, err
	}
	hwm, rss, err := parseProcStatus(status)
	if err != nil {
		return procSample{}, err
	}
	return procSample{CPUSeconds: cpu, PeakRSSBytes: hwm, RSSBytes: rss}, nil
}

// parseProcStat returns utime+stime in seconds from /proc/<pid>/stat. The
// command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseProcStat(stat []byte) (float64, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat %q: no command name", truncate(s, 80))
	}
	// After the name: state is field 3, utime field 14, stime field 15.
	fields := strings.Fields(s[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the command name, want more than %d", len(fields), stime)
	}
	var ticks uint64
	for _, f := range []int{utime, stime} {
		n, err := strconv.ParseUint(fields[f], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc stat field %d: %w", f+3, err)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}

// parseProcStatus returns VmHWM and VmRSS in bytes from /proc/<pid>/status.
func parseProcStatus(status []byte) (hwm, rss int64, err error) {
	found := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("parse /proc status %s: %q is not a size in kB", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse /proc status %s: %w", key, err)
		}
		found[key] = kb << 10
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("parse /proc status: %w", err)
	}
	for _, k := range []string{"VmHWM", "VmRSS"} {
		if _, ok := found[k]; !ok {
			return 0, 0, fmt.Errorf("parse /proc status: no %s (a kernel thread or a zombie?)", k)
		}
	}
	return found["VmHWM"], found["VmRSS"], nil
}

// truncate returns s cut to at most n bytes, for error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
