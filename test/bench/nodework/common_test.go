//go:build bench && linux

package nodeworkbench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Environment of the coordinator child process.
const (
	// roleEnv selects the process's role; roleCoordinator makes TestMain run
	// the coordinator instead of the tests.
	roleEnv         = "SHOAL_BENCH_ROLE"
	roleCoordinator = "coordinator"
	// pkiDirEnv names the dir holding the serving certificate.
	pkiDirEnv = "SHOAL_BENCH_PKI_DIR"
	// lifetimeEnv caps the child's life (a Go duration), whatever happens
	// to its parent.
	lifetimeEnv = "SHOAL_BENCH_LIFETIME"
	// readyPrefix starts the line the child prints on stdout once it serves:
	// "SHOAL_BENCH_READY <grpc addr> <control addr>".
	readyPrefix = "SHOAL_BENCH_READY"
)

// memSample is one process's memory, read after two full GCs, the second
// also returning freed memory to the OS: RSS is not padded by garbage not
// yet scavenged, nor by buffers parked in sync.Pools (a pool keeps what it
// held through one GC; an idle process loses it within two of Go's
// periodic GCs, about four minutes).
type memSample struct {
	// HeapInuse is runtime.MemStats.HeapInuse: bytes in in-use heap spans.
	HeapInuse uint64 `json:"heapInuse"`
	// HeapAlloc is the bytes of live heap objects.
	HeapAlloc uint64 `json:"heapAlloc"`
	// StackInuse is the bytes of goroutine stacks (not part of the heap).
	StackInuse uint64 `json:"stackInuse"`
	// RSS is VmRSS from /proc/self/status.
	RSS uint64 `json:"rss"`
	// Goroutines is runtime.NumGoroutine.
	Goroutines int `json:"goroutines"`
}

// sampleMemory measures this process.
func sampleMemory() (memSample, error) {
	runtime.GC()         // pooled buffers move to the pools' victim caches
	debug.FreeOSMemory() // a GC that empties them, then the scavenge
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, err := readRSS()
	if err != nil {
		return memSample{}, err
	}
	return memSample{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse, RSS: rss, Goroutines: runtime.NumGoroutine()}, nil
}

// readRSS returns VmRSS in bytes.
func readRSS() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmRSS %q: %w", sc.Text(), err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

// raiseFDLimit lifts RLIMIT_NOFILE's soft limit to the hard limit and
// returns the new soft limit: a thousand streams are a thousand sockets at
// each end, plus a state-dir lock per agent.
func raiseFDLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("get RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, nil
}

// Replies of the coordinator's control endpoint.
type (
	// agentsReply answers GET /agents.
	agentsReply struct {
		// Connected is len(Server.Agents()).
		Connected int `json:"connected"`
		// Accepted and Refused count stream attempts (from the server's
		// metrics): more accepted than agents means some reconnected.
		Accepted int `json:"accepted"`
		Refused  int `json:"refused"`
	}
	// putReply answers POST /put.
	putReply struct {
		// Nodes is how many nodes got the item.
		Nodes int `json:"nodes"`
		// PutNanos is how long the Put loop over all nodes took.
		PutNanos int64 `json:"putNanos"`
	}
	// roundReply answers GET /round: per node, the time from the start of
	// the Put loop to the coordinator's receipt of the item's first report
	// (Ack, any phase), first RUNNING or SUCCEEDED report (Start) and
	// SUCCEEDED report (Done).
	roundReply struct {
		Nodes      int      `json:"nodes"`
		AckNanos   []int64  `json:"ackNanos"`
		StartNanos []int64  `json:"startNanos"`
		DoneNanos  []int64  `json:"doneNanos"`
		Missing    []string `json:"missing,omitempty"`
	}
)
