//go:build bench && linux

package p2p

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
)

// The benchmark's parameters, from the environment (make bench-p2p sets
// none: these defaults are the goal configuration).
type params struct {
	N           int     // nodes
	SizeMiB     int     // image size S
	Layers      int     // layers of the image
	BMiB        float64 // per-node bandwidth B, MiB/s (ingress and egress)
	RMiB        float64 // registry egress R, MiB/s
	Parallelism int     // k of the parallelism scenario
	Modes       []string
	Scenarios   []string
	Out         string // where the plots and results go
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func envFloat(k string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func envList(k string, def []string) []string {
	if v := os.Getenv(k); v != "" {
		return strings.Split(v, ",")
	}
	return def
}

func loadParams() params {
	p := params{
		N: envInt("P2P_N", 16), SizeMiB: envInt("P2P_SIZE_MIB", 256), Layers: envInt("P2P_LAYERS", 4),
		BMiB: envFloat("P2P_B_MIB", 4), Parallelism: envInt("P2P_PARALLELISM", 4),
		Modes:     envList("P2P_MODES", []string{"swarm", "swarm-tls", "spegel-like", "naive"}),
		Scenarios: envList("P2P_SCENARIOS", []string{"cold", "parallelism", "partial", "faults"}),
		Out:       os.Getenv("P2P_OUT"),
	}
	p.RMiB = envFloat("P2P_R_MIB", p.BMiB)
	if p.Out == "" {
		p.Out = filepath.Join(os.TempDir(), "shoal-bench-p2p")
	}
	return p
}

const mib = 1 << 20

// TestP2PBenchmark is make bench-p2p (build tag bench).
//
// The swarm's runs go one at a time, alone on the machine: they move N·S
// bytes between the nodes at B each, and the calibration checks that the
// machine can keep up. The baselines' runs are registry-bound (N·S/R
// each, 17 minutes at B=R=4 MiB/s) and use little CPU: they run side by
// side, each with its own registry, addresses and stores, so that one run
// of the benchmark takes about half an hour instead of two and a half.
func TestP2PBenchmark(t *testing.T) {
	p := loadParams()
	require.NoError(t, os.MkdirAll(p.Out, 0o755))
	bin := buildNode(t)
	h := &harness{p: p, bin: bin}

	h.calibrate(t)
	var mu sync.Mutex
	results := map[string][]*runResult{} // scenario -> per mode
	add := func(r *runResult) {
		mu.Lock()
		defer mu.Unlock()
		results[r.scenario] = append(results[r.scenario], r)
		r.printRow(os.Stdout)
	}
	// The swarm with and without peer TLS, back to back in each scenario,
	// so that the two see the same machine.
	for _, sc := range p.Scenarios {
		for _, mode := range []string{"swarm", "swarm-tls"} {
			if slices.Contains(p.Modes, mode) {
				add(h.run(t, runSpec{mode: mode, scenario: sc, storeRoot: "/dev/shm"}))
			}
		}
	}
	t.Run("baselines", func(t *testing.T) {
		// Their stores (up to N·S each) go to disk, not to memory.
		root := filepath.Join(p.Out, "stores")
		require.NoError(t, os.MkdirAll(root, 0o755))
		slot := 1
		for _, sc := range p.Scenarios {
			for _, mode := range p.Modes {
				if swarmMode(mode) {
					continue
				}
				spec := runSpec{mode: mode, scenario: sc, slot: slot, storeRoot: root, sideBySide: true}
				slot++
				t.Run(mode+"/"+sc, func(t *testing.T) {
					t.Parallel()
					add(h.run(t, spec))
				})
			}
		}
	})
	require.False(t, t.Failed(), "a run failed")
	for _, rs := range results {
		slices.SortFunc(rs, func(a, b *runResult) int { return slices.Index(p.Modes, a.mode) - slices.Index(p.Modes, b.mode) })
	}
	for _, sc := range p.Scenarios {
		var series []cdfSeries
		for _, r := range results[sc] {
			series = append(series, cdfSeries{Name: r.mode, Values: r.durations()})
		}
		path := filepath.Join(p.Out, "cdf-"+sc+".png")
		require.NoError(t, writeCDFPNG(path, fmt.Sprintf("%s: completion CDF, N=%d S=%dMiB B=%gMiB/s R=%gMiB/s", sc, p.N, p.SizeMiB, p.BMiB, p.RMiB),
			"seconds, each node from its own start", series))
		fmt.Printf("plot: %s\n", path)
	}
	fmt.Println()
	printTable(os.Stdout, h, p, results)
	for _, sc := range p.Scenarios {
		for _, r := range results[sc] {
			fmt.Println(r.resultLine())
		}
	}
	// Correctness holds in every run; the performance goals are reported,
	// not asserted (a benchmark, not a test).
	for _, rs := range results {
		for _, r := range rs {
			require.Zero(t, r.corrupted, "%s/%s committed corrupted blobs", r.mode, r.scenario)
			require.Empty(t, r.failed, "%s/%s: nodes failed", r.mode, r.scenario)
		}
	}
}

// buildNode builds the node binary into the test's temp dir.
func buildNode(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "node")
	cmd := exec.Command("go", "build", "-o", bin, "./node")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	require.NoError(t, cmd.Run(), "build the node binary")
	return bin
}

// harness runs the scenarios.
type harness struct {
	p   params
	bin string
	// tlsOnce makes tlsDir: the CA (ca.crt, ca.key) the swarm-tls nodes
	// sign their peer certificates with.
	tlsOnce sync.Once
	tlsDir  string
	// tMin is the calibration: how long the N nodes take to warm the
	// image with no B and no R, when the machine alone sets the pace.
	tMin float64
	// cpuPerGiB is the calibration's CPU-seconds (nodes and registry) per
	// GiB delivered to a node.
	cpuPerGiB float64
}

// tStar is the physical limit max(S/R, S/B) for need bytes.
func (h *harness) tStar(need, upstream int64) float64 {
	return math.Max(float64(upstream)/(h.p.RMiB*mib), float64(need)/(h.p.BMiB*mib))
}

// calibrate runs the cold scenario with the N swarm nodes unshaped (no B,
// no R): its T_all is the fastest this machine moves the N·S bytes, and a
// shaped run is network-bound only if T* leaves the machine well ahead of
// it. A run's own CPU use, printed with its result, confirms it.
func (h *harness) calibrate(t *testing.T) {
	r := h.run(t, runSpec{mode: "swarm", scenario: "cold", storeRoot: "/dev/shm", unshaped: true})
	require.Zero(t, r.corrupted)
	require.Empty(t, r.failed)
	h.tMin = r.tAll
	h.cpuPerGiB = r.cpuSeconds / (float64(r.deliveredBytes) / (1 << 30))
	size := int64(h.p.SizeMiB) * mib
	tStar := h.tStar(size, size)
	fmt.Printf("calibration: %d unshaped swarm nodes warm %d MiB each in T_min = %.1f s at %.0f%% of the cores, %.2f CPU-s per GiB delivered\n",
		h.p.N, h.p.SizeMiB, h.tMin, r.cpuUse()*100, h.cpuPerGiB)
	verdict := "network-bound (T_min <= T*/2: the machine needs at most half of the run at its fastest)"
	if h.tMin > tStar/2 {
		verdict = fmt.Sprintf("WARNING: CPU-bound (T_min > T*/2): the machine, not the network, sets the pace; lower B (at most %.1f MiB/s here) or N",
			float64(h.p.SizeMiB)/(2*h.tMin))
	}
	fmt.Printf("calibration: B=%g MiB/s R=%g MiB/s: T* = %.1f s vs T_min = %.1f s: %s\n", h.p.BMiB, h.p.RMiB, tStar, h.tMin, verdict)
}

// layers returns the image's layers; seed picks their content.
func (h *harness) layers(seed uint64) []layerSpec {
	total := int64(h.p.SizeMiB) * mib
	out := make([]layerSpec, h.p.Layers)
	for i := range out {
		out[i] = layerSpec{Size: total / int64(h.p.Layers), Seed: seed + uint64(i)}
	}
	return out
}

// runResult is one mode × scenario.
type runResult struct {
	mode, scenario string
	n              int
	sizeMiB        float64
	nodes          []nodeResult
	tAll           float64
	upstreamBytes  int64
	unionNeed      int64 // bytes no node held at the start (α's denominator)
	peakStreams    int
	rejected       int64
	corrupted      int
	failed         []string
	cpuSeconds     float64 // nodes and registry (nodes only when sideBySide)
	harnessCPU     float64 // of cpuSeconds, the registry's and harness's
	sideBySide     bool    // ran beside other runs (see runSpec)
	deliveredBytes int64
	restarts       int
}

// nodeResult is one node's part of a run.
type nodeResult struct {
	name       string
	start      float64 // seconds after t0
	duration   float64 // from its start to verified
	need       int64   // bytes it lacked
	tStar      float64
	cpu        float64
	peakRSS    int64
	served     float64
	received   float64
	memberlist float64
	trackerRPC float64
	dupBytes   float64
	blacklist  float64
	mismatches float64
	badPieces  float64
}

func (r *runResult) durations() []float64 {
	out := make([]float64, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.duration
	}
	return out
}

// etas returns every node's η = T*_i/duration_i, sorted best first.
func (r *runResult) etas() []float64 {
	out := make([]float64, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.tStar / n.duration
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(out)))
	return out
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (r *runResult) etaP(q float64) float64 { return quantile(r.etas(), q) }

func (r *runResult) durP(q float64) float64 {
	d := r.durations()
	sort.Float64s(d)
	return quantile(d, q)
}

// cpuUse is the share of the machine's cores the run used.
func (r *runResult) cpuUse() float64 { return r.coreShare(r.cpuSeconds) }

// coreShare is the share of the machine's cores cpuSeconds took over the
// run.
func (r *runResult) coreShare(cpuSeconds float64) float64 {
	return cpuSeconds / (float64(runtime.NumCPU()) * r.tAll)
}

func (r *runResult) alpha() float64 { return float64(r.upstreamBytes) / float64(r.unionNeed) }

func (r *runResult) resultLine() string {
	return fmt.Sprintf("RESULT mode=%s scenario=%s n=%d size_mib=%g eta_p50=%.3f eta_p99=%.3f alpha=%.3f t_all_s=%.2f",
		r.mode, r.scenario, r.n, r.sizeMiB, r.etaP(0.5), r.etaP(0.99), r.alpha(), r.tAll)
}

func (r *runResult) printRow(w io.Writer) {
	cpu := fmt.Sprintf("CPU %3.0f%% of the cores (registry and harness %.0f%%)", r.cpuUse()*100, r.coreShare(r.harnessCPU)*100)
	if r.sideBySide {
		cpu = fmt.Sprintf("CPU %3.0f%% of the cores (nodes only; ran beside the other baselines)", r.cpuUse()*100)
	}
	fmt.Fprintf(w, "%-11s %-11s T_all %7.2f s  p50 %7.2f  p99 %7.2f  max %7.2f  eta p50 %.3f p99 %.3f  alpha %.3f  %s  restarts %d\n",
		r.mode, r.scenario, r.tAll, r.durP(0.5), r.durP(0.99), r.durP(1), r.etaP(0.5), r.etaP(0.99), r.alpha(), cpu, r.restarts)
	// The run itself says whether the machine kept up.
	if r.cpuUse() >= 0.9 {
		fmt.Fprintf(w, "WARNING: %s/%s used %.0f%% of the cores: the machine, not the network, may have set its pace; lower B or N\n",
			r.mode, r.scenario, r.cpuUse()*100)
	}
}

// printTable prints the full table of every run.
func printTable(w io.Writer, h *harness, p params, results map[string][]*runResult) {
	fmt.Fprintf(w, "N=%d S=%d MiB (%d layers) B=%g MiB/s R=%g MiB/s; T*=max(S/R,S/B)=%.1f s; T_naive=max(S/B,N*S/R)=%.1f s; calibration (unshaped) T_min %.1f s, %.2f CPU-s/GiB\n",
		p.N, p.SizeMiB, p.Layers, p.BMiB, p.RMiB, float64(p.SizeMiB)/math.Min(p.BMiB, p.RMiB),
		math.Max(float64(p.SizeMiB)/p.BMiB, float64(p.N*p.SizeMiB)/p.RMiB), h.tMin, h.cpuPerGiB)
	fmt.Fprintln(w, "The baselines ran side by side (registry-bound, each with its own registry): their CPU columns count their nodes only.")
	fmt.Fprintln(w, "| scenario | mode | T_all s | p50 s | p99 s | max s | η p50 | η p99 | T_naive/T_all | α | upstream req peak | served max/mean MiB | dup MiB | CPU-s/GiB | CPU use | peak RSS MiB (max) | memberlist KiB/node | tracker RPCs/node | blacklistings | digest mismatches | bad pieces | corrupted |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	tNaive := math.Max(float64(p.SizeMiB)/p.BMiB, float64(p.N*p.SizeMiB)/p.RMiB)
	for _, sc := range p.Scenarios {
		for _, r := range results[sc] {
			var servedMax, servedSum, dup, rss, ml, rpc, bl, mm, bad float64
			for _, n := range r.nodes {
				servedMax = math.Max(servedMax, n.served)
				servedSum += n.served
				dup += n.dupBytes
				rss = math.Max(rss, float64(n.peakRSS))
				ml += n.memberlist
				rpc += n.trackerRPC
				bl += n.blacklist
				mm += n.mismatches
				bad += n.badPieces
			}
			k := float64(len(r.nodes))
			fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.2f | %.3f | %d | %.0f/%.0f | %.1f | %.2f | %.0f%% | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %d |\n",
				sc, r.mode, r.tAll, r.durP(0.5), r.durP(0.99), r.durP(1), r.etaP(0.5), r.etaP(0.99), tNaive/r.tAll, r.alpha(),
				r.peakStreams, servedMax/mib, servedSum/k/mib, dup/mib, r.cpuSeconds/(float64(r.deliveredBytes)/(1<<30)),
				r.cpuUse()*100, rss/mib, ml/k/1024, rpc/k, bl, mm, bad, r.corrupted)
		}
	}
}

// swarmMode reports whether mode is the swarm (with or without peer TLS):
// those runs go one at a time.
func swarmMode(mode string) bool { return mode == "swarm" || mode == "swarm-tls" }

// peerCA writes the swarm-tls nodes' CA once and returns its directory.
func (h *harness) peerCA(t *testing.T) string {
	h.tlsOnce.Do(func() {
		ca, err := peertlstest.NewCA("bench-p2p")
		require.NoError(t, err)
		der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		require.NoError(t, err)
		dir := filepath.Join(h.p.Out, "peer-ca")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca.BundlePEM, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
		h.tlsDir = dir
	})
	require.NotEmpty(t, h.tlsDir, "the peer CA was not written")
	return h.tlsDir
}
