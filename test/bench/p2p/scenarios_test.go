//go:build bench && linux

package p2p

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
)

// images are a run's registry and the benchmark's images in it.
type images struct {
	reg    *benchRegistry
	v1, v2 benchImage // v2 shares its first half of layers with v1
}

// newImages starts a registry of its own for one run, throttled to
// bytesPerSecond (0: unthrottled), with v1 and v2 (the layers' bytes are
// generated once and shared between registries). A run shares nothing with
// the runs before it or beside it: not the throttle's debt, not a fault
// window, not the counters.
func (h *harness) newImages(t *testing.T, bytesPerSecond int64) images {
	reg := startRegistry(t, registryOptions{BytesPerSecond: bytesPerSecond})
	l1 := h.layers(1)
	l2 := h.layers(101)
	copy(l2, l1[:len(l1)/2]) // the base layers
	return images{reg: reg, v1: reg.pushImage(t, "bench/app", "v1", l1), v2: reg.pushImage(t, "bench/app", "v2", l2)}
}

// runSpec says what one run does and where.
type runSpec struct {
	mode, scenario string
	// slot picks the run's block of loopback addresses: runs side by side
	// have different slots.
	slot int
	// storeRoot holds the nodes' stores.
	storeRoot string
	// unshaped runs without B and R (the calibration).
	unshaped bool
	// sideBySide says other runs share the machine and this process (the
	// registry's CPU is then not told apart from theirs).
	sideBySide bool
}

// run runs one scenario in one mode.
func (h *harness) run(t *testing.T, spec runSpec) *runResult {
	mode, scenario := spec.mode, spec.scenario
	p := h.p
	rate := int64(p.RMiB * mib)
	if spec.unshaped {
		rate = 0
	}
	imgs := h.newImages(t, rate)
	reg := imgs.reg
	img := imgs.v1
	if scenario == "partial" {
		img = imgs.v2
	}
	res := &runResult{mode: mode, scenario: scenario, n: p.N, sizeMiB: float64(img.Size()) / mib, sideBySide: spec.sideBySide}
	bw := int64(p.BMiB * mib)
	slow, poisoned := -1, -1
	kills := map[int]bool{}
	if scenario == "faults" {
		slow, poisoned = 1, 2
		for i := p.N - max(1, p.N/4); i < p.N; i++ {
			kills[i] = true
		}
	}
	// What each node holds at the start: in the partial scenario the first
	// half holds v1, whose blobs are put in their stores before they start.
	held := make([]map[v1.Hash]bool, p.N)
	for i := range held {
		held[i] = map[v1.Hash]bool{}
		if scenario == "partial" && i < p.N/2 {
			for _, b := range imgs.v1.Blobs() {
				held[i][b.Digest] = true
			}
		}
	}
	nodes := h.startNodes(t, nodeSet{reg: reg, n: p.N, mode: mode, slot: spec.slot, root: spec.storeRoot,
		name: mode + "-" + scenario}, func(i int) []string {
		egress := bw
		if i == slow {
			egress = bw / 10 // a slow uploader: hedging must route around it
		}
		var f []string
		if !spec.unshaped {
			f = []string{"--ingress", fmt.Sprint(bw), "--egress", fmt.Sprint(egress)}
		}
		if i == poisoned {
			f = append(f, "--poison")
		}
		if extra := os.Getenv("P2P_NODE_FLAGS"); extra != "" {
			f = append(f, strings.Fields(extra)...)
		}
		if dir := os.Getenv("P2P_CPUPROFILE_DIR"); dir != "" {
			f = append(f, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", mode, scenario, i)))
		}
		return f
	}, func(i int, dir string) {
		for d := range held[i] {
			writeBlob(t, reg, dir, "bench/app", d)
		}
	})
	defer h.stopNodes(nodes)

	anyHeld := map[v1.Hash]bool{}
	for i := range held {
		for d := range held[i] {
			anyHeld[d] = true
		}
	}
	for _, b := range img.Blobs() {
		if !anyHeld[b.Digest] {
			res.unionNeed += b.Size
		}
	}

	reg.resetStats()
	self0, err := readProcSelf()
	require.NoError(t, err)
	cpu0 := make([]float64, len(nodes))
	for i, np := range nodes {
		ps, err := readProc(np.cmd.Process.Pid)
		require.NoError(t, err)
		cpu0[i] = ps.CPUSeconds
	}
	t0 := time.Now()
	starts := make([]time.Time, p.N)
	next := 0
	launch := func() {
		starts[next] = time.Now()
		nodes[next].warm(img.Ref)
		next++
	}
	k := p.N
	if scenario == "parallelism" {
		k = min(p.Parallelism, p.N)
	}
	for range k {
		launch()
	}
	var faultTimers []*time.Timer
	if scenario == "faults" {
		faultTimers = append(faultTimers,
			time.AfterFunc(2*time.Second, func() { reg.failFor(5*time.Second, 429) }),
			time.AfterFunc(7*time.Second, func() { reg.failFor(5*time.Second, 503) }))
	}
	defer func() {
		for _, ft := range faultTimers {
			ft.Stop()
		}
	}()

	needs := make([]int64, p.N) // the bytes each node lacks
	for i := range needs {
		needs[i] = needOf(img, held[i])
	}
	res.nodes = make([]nodeResult, p.N)
	finished := make([]bool, p.N)
	killed := map[int]bool{}
	limit := time.Duration(3*float64(p.N)*res.sizeMiB/p.RMiB*float64(time.Second)) + 2*time.Minute
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	trace := os.Getenv("P2P_TRACE") != ""
	lastTrace := time.Now()
	for remaining := p.N; remaining > 0; {
		if trace && time.Since(lastTrace) >= 2*time.Second {
			lastTrace = time.Now()
			lo, hi := int64(math.MaxInt64), int64(0)
			for _, np := range nodes {
				lo, hi = min(lo, np.progress.Load()), max(hi, np.progress.Load())
			}
			fmt.Printf("trace %5.1fs upstream %6.1f MiB  node progress min %6.1f max %6.1f MiB:",
				time.Since(t0).Seconds(), float64(reg.stats().BlobBytes)/mib, float64(lo)/mib, float64(hi)/mib)
			for _, np := range nodes {
				fmt.Printf(" %.0f", float64(np.progress.Load())/mib)
			}
			fmt.Println()
		}
		require.True(t, time.Now().Before(deadline), "%s/%s: %d nodes unfinished after %s", mode, scenario, remaining, limit)
		<-tick.C
		for i, np := range nodes {
			if i >= next || finished[i] {
				continue
			}
			select {
			case d := <-np.done:
				finished[i] = true
				remaining--
				if d.err != "" {
					res.failed = append(res.failed, np.name+": "+d.err)
				}
				res.nodes[i] = nodeResult{name: np.name, start: starts[i].Sub(t0).Seconds(), duration: d.at.Sub(starts[i]).Seconds()}
				res.tAll = math.Max(res.tAll, d.at.Sub(t0).Seconds())
				if next < p.N {
					launch()
				}
			default:
				if kills[i] && !killed[i] && np.progress.Load() >= needs[i]/2 {
					killed[i] = true
					res.restarts++
					np.kill()
					np.start(t)
					<-np.ready
					np.warm(img.Ref)
				}
			}
		}
	}
	// Measure before stopping.
	for i, np := range nodes {
		nr := &res.nodes[i]
		nr.need = needs[i]
		// What no node held must come from upstream, whoever fetches it.
		nr.tStar = h.tStar(needs[i], res.unionNeed)
		ps, err := readProc(np.cmd.Process.Pid)
		require.NoError(t, err)
		nr.cpu = ps.CPUSeconds + np.cpuBefore - cpu0[i]
		nr.peakRSS = ps.PeakRSSBytes
		c := np.ask(t, "stats")["counters"].(map[string]any)
		get := func(k string) float64 { v, _ := c[k].(float64); return v }
		nr.served = get("shoal_agent_blob_served_bytes_total")
		nr.received = get("shoal_agent_swarm_received_bytes_total")
		nr.memberlist = get("memberlist_sent_bytes")
		nr.trackerRPC = get("shoal_agent_tracker_client_rpcs_total")
		nr.dupBytes = get("shoal_agent_swarm_duplicate_bytes_total")
		nr.blacklist = get("shoal_agent_swarm_blacklistings_total")
		nr.mismatches = get("shoal_agent_swarm_digest_mismatches_total")
		nr.badPieces = get("shoal_agent_swarm_bad_pieces_total")
		if trace {
			fmt.Printf("trace node %2d %-8s done %6.2f s  leases %.0f  upstream MiB %6.1f  received MiB %6.1f  served MiB %6.1f\n",
				i, np.name, nr.start+nr.duration, get("shoal_agent_swarm_upstream_leases_total"),
				get("shoal_agent_swarm_upstream_bytes_total")/mib, nr.received/mib, nr.served/mib)
		}
		res.cpuSeconds += nr.cpu
		res.deliveredBytes += needs[i]
	}
	if !spec.sideBySide {
		self1, err := readProcSelf()
		require.NoError(t, err)
		res.harnessCPU = self1.CPUSeconds - self0.CPUSeconds
		res.cpuSeconds += res.harnessCPU
	}
	st := reg.stats()
	res.upstreamBytes, res.peakStreams, res.rejected = st.BlobBytes, st.PeakStreams, st.Rejected
	for _, np := range nodes {
		bad, missing := verifyStore(t, np.storeDir(), img)
		res.corrupted += bad
		if missing > 0 {
			res.failed = append(res.failed, fmt.Sprintf("%s: %d blobs missing from the store", np.name, missing))
		}
	}
	return res
}

// needOf is the bytes of img a node lacks.
func needOf(img benchImage, held map[v1.Hash]bool) int64 {
	var n int64
	for _, b := range img.Blobs() {
		if !held[b.Digest] {
			n += b.Size
		}
	}
	return n
}

// writeBlob puts blob d of repo into a store directory as a complete blob.
func writeBlob(t require.TestingT, reg *benchRegistry, dir, repo string, d v1.Hash) {
	r := reg.lookupRepo(repo)
	require.NotNil(t, r)
	b, ok := r.blobs[d.String()]
	require.True(t, ok, "blob %s", d)
	p := filepath.Join(dir, "blobs", "sha256", d.Hex)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, b.data, 0o644))
}

// verifyStore hashes every committed blob of a node's store: bad counts
// files whose content does not match their name, missing the image's
// blobs not there.
func verifyStore(t require.TestingT, dir string, img benchImage) (bad, missing int) {
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, e := range entries {
		f, err := os.Open(filepath.Join(blobs, e.Name()))
		require.NoError(t, err)
		hsh := sha256.New()
		_, err = io.Copy(hsh, f)
		_ = f.Close()
		require.NoError(t, err)
		if hex.EncodeToString(hsh.Sum(nil)) != e.Name() {
			bad++
		}
		have[e.Name()] = true
	}
	for _, b := range img.Blobs() {
		if !have[b.Digest.Hex] {
			missing++
		}
	}
	return bad, missing
}
