//go:build bench && linux

package p2p

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Fixed ports of every simulated node (each has its own loopback address).
const (
	peerPort = 5100
	meshPort = 7946
	// meshKey encrypts the benchmark's mesh like an agent's.
	meshKey = "c2hvYWwtYmVuY2gtcDJwLW1lc2gta2V5LTMyYnl0ZXM="
)

// nodeAddr is node i's loopback address.
func nodeAddr(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+(i+10)/250, 1+(i+10)%250) }

// nodeProc is one node process and what it reported.
type nodeProc struct {
	name, addr string
	args       []string
	bin        string
	log        *os.File
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	progress   atomic.Int64
	ready      chan struct{}
	done       chan doneEvent
	replies    chan map[string]any
	exited     chan struct{}
	cpuBefore  float64 // CPU of earlier incarnations (restarts)
}

// doneEvent is a node's end of a warm.
type doneEvent struct {
	at  time.Time
	err string
}

// nodeSet is a group of nodes startNodes starts.
type nodeSet struct {
	reg  *benchRegistry
	n    int
	mode string
	// slot picks the nodes' loopback addresses: node i of slot s is
	// nodeAddr(s*n+i), so that sets side by side do not collide.
	slot int
	// root is where the stores go (a directory per set is made in it).
	root string
	// name names the set's log directory.
	name string
}

// startNodes starts a set of nodes; flags adds per-node flags.
//
// prepare, if set, is called with each node's store directory before the
// node starts (to put blobs there).
func (h *harness) startNodes(t *testing.T, set nodeSet, flags func(i int) []string, prepare func(i int, storeDir string)) []*nodeProc {
	n, reg, mode := set.n, set.reg, set.mode
	root, err := os.MkdirTemp(set.root, fmt.Sprintf("shoal-bench-p2p-%d-", os.Getpid()))
	require.NoError(t, err)
	logs := filepath.Join(h.p.Out, "logs", set.name)
	require.NoError(t, os.RemoveAll(logs))
	require.NoError(t, os.MkdirAll(logs, 0o755))
	addr := func(i int) string { return nodeAddr(set.slot*n + i) }
	nodes := make([]*nodeProc, n)
	for i := range nodes {
		np := &nodeProc{name: fmt.Sprintf("node-%02d", i), addr: addr(i), bin: h.bin}
		nodeMode := mode
		var tlsArgs []string
		if mode == "swarm-tls" {
			nodeMode, tlsArgs = "swarm", []string{"--peer-tls-ca", h.peerCA(t)}
		}
		np.args = []string{"--name", np.name, "--addr", np.addr, "--port", strconv.Itoa(peerPort),
			"--mesh-port", strconv.Itoa(meshPort), "--store", filepath.Join(root, np.name), "--mode", nodeMode,
			"--insecure-registry", reg.Host(), "--mesh-key", meshKey, "-v", "1"}
		np.args = append(np.args, tlsArgs...)
		if i > 0 {
			np.args = append(np.args, "--join", fmt.Sprintf("%s:%d", addr(0), meshPort))
		}
		if flags != nil {
			np.args = append(np.args, flags(i)...)
		}
		f, err := os.Create(filepath.Join(logs, np.name+".log"))
		require.NoError(t, err)
		np.log = f
		nodes[i] = np
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	for i, np := range nodes {
		if prepare != nil {
			prepare(i, np.storeDir())
		}
		np.start(t)
	}
	for _, np := range nodes {
		select {
		case <-np.ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not get ready", np.name)
		}
	}
	// Wait until every node sees every other (bounded).
	deadline := time.Now().Add(30 * time.Second)
	for _, np := range nodes {
		for {
			r := np.ask(t, "members")
			if int(r["count"].(float64)) == n {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s sees %v of %d members", np.name, r["count"], n)
			time.Sleep(50 * time.Millisecond) // polling a process's view; bounded by deadline
		}
	}
	return nodes
}

// storeDir returns the node's store directory.
func (np *nodeProc) storeDir() string {
	for i, a := range np.args {
		if a == "--store" {
			return np.args[i+1]
		}
	}
	return ""
}

// nodeGOMAXPROCS is the GOMAXPROCS of every node process: 1 unless
// P2P_NODE_GOMAXPROCS says otherwise. Sixteen nodes share the machine's
// cores; with a P per core each, idle Ps spinning for work while the
// node's goroutines wake and sleep for every paced chunk cost more CPU
// than the node's own work (a fifth of all node CPU at B=4 MiB/s), so the
// machine, not the network, would set the pace.
func nodeGOMAXPROCS() string {
	return cmp.Or(os.Getenv("P2P_NODE_GOMAXPROCS"), "1")
}

// start starts (or restarts) the process.
func (np *nodeProc) start(t *testing.T) {
	t.Helper()
	np.cmd = exec.Command(np.bin, np.args...)
	np.cmd.Env = append(os.Environ(), "GOMAXPROCS="+nodeGOMAXPROCS())
	np.cmd.Stderr = np.log
	np.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := np.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := np.cmd.StdoutPipe()
	require.NoError(t, err)
	np.stdin = stdin
	np.ready, np.done = make(chan struct{}), make(chan doneEvent, 4)
	np.replies, np.exited = make(chan map[string]any, 4), make(chan struct{})
	np.progress.Store(0)
	require.NoError(t, np.cmd.Start(), np.name)
	ready, done, replies, exited := np.ready, np.done, np.replies, np.exited
	cmd := np.cmd
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev["event"] {
			case "ready":
				close(ready)
			case "progress":
				np.progress.Store(int64(ev["bytes"].(float64)))
			case "done":
				e, _ := ev["error"].(string)
				done <- doneEvent{at: time.Now(), err: e}
			default:
				replies <- ev
			}
		}
		_ = cmd.Wait()
	}()
}

// send writes a command.
func (np *nodeProc) send(cmd map[string]any) {
	b, _ := json.Marshal(cmd)
	_, _ = np.stdin.Write(append(b, '\n'))
}

// ask sends a command and returns its reply.
func (np *nodeProc) ask(t *testing.T, op string) map[string]any {
	t.Helper()
	np.send(map[string]any{"op": op})
	select {
	case r := <-np.replies:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not answer %s", np.name, op)
		return nil
	}
}

// warm asks the node to warm an image.
func (np *nodeProc) warm(ref string) { np.send(map[string]any{"op": "warm", "image": ref}) }

// kill kills the process at once (SIGKILL) and waits for it.
func (np *nodeProc) kill() {
	if ps, err := readProc(np.cmd.Process.Pid); err == nil {
		np.cpuBefore += ps.CPUSeconds
	}
	_ = np.cmd.Process.Kill()
	<-np.exited
}

// stopNodes stops every node (SIGTERM, then SIGKILL after 5 s) and
// removes their stores.
func (h *harness) stopNodes(nodes []*nodeProc) {
	defer func() {
		if len(nodes) > 0 {
			_ = os.RemoveAll(filepath.Dir(nodes[0].storeDir()))
		}
	}()
	for _, np := range nodes {
		_ = np.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, np := range nodes {
		select {
		case <-np.exited:
		case <-time.After(5 * time.Second):
			_ = np.cmd.Process.Kill()
			<-np.exited
		}
		_ = np.log.Close()
	}
}
