//go:build bench

package probecost

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// every Linux architecture Shoal builds for).
const clockTick = 10 * time.Millisecond

// cpuSample is the CPU time used so far by the agent side (this process:
// getrusage RUSAGE_SELF, user+system, every thread) and by the runtime side
// (the private containerd and each of its shims: their own user+system
// time plus that of the children they reaped, which is where the runc
// processes of an exec, and the exec'd command, end up).
type cpuSample struct {
	at      time.Time
	agent   time.Duration
	runtime map[int]time.Duration // by pid
}

func (e *podEnv) sample() (cpuSample, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}, fmt.Errorf("getrusage: %w", err)
	}
	s := cpuSample{
		at:      time.Now(),
		agent:   time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		runtime: map[int]time.Duration{},
	}
	for _, pid := range append([]int{e.containerdPID}, e.shimPIDs()...) {
		d, err := procCPU(pid)
		if err != nil {
			if pid == e.containerdPID {
				return cpuSample{}, err
			}
			continue // a shim that just ended
		}
		s.runtime[pid] = d
	}
	return s, nil
}

// usage is CPU used between two samples.
type usage struct {
	wall    time.Duration
	agent   time.Duration
	runtime time.Duration
}

// since returns the usage from s0 to s. The runtime side counts the
// processes present in both samples only (the shims live as long as the
// pod; a process that came or went would count from zero).
func (s cpuSample) since(s0 cpuSample) usage {
	u := usage{wall: s.at.Sub(s0.at), agent: s.agent - s0.agent}
	for pid, d := range s.runtime {
		if d0, ok := s0.runtime[pid]; ok {
			u.runtime += d - d0
		}
	}
	return u
}

// procCPU returns utime+stime+cutime+cstime of process pid from
// /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStat(string(data))
}

// parseStat reads fields 14-17 (utime, stime, cutime, cstime) of a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so fields are counted from its closing parenthesis.
func parseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat %q: no command name", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): field n is fields[n-3].
	if len(fields) < 17-3+1 {
		return 0, fmt.Errorf("parse /proc stat %q: too few fields", stat)
	}
	var ticks int64
	for n := 14; n <= 17; n++ {
		v, err := strconv.ParseInt(fields[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc stat field %d: %w", n, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}
