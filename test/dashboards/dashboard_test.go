// Package dashboards checks the Grafana dashboards of deploy/dashboards
// against the metrics Shoal exports: every panel has a title, a
// description and queries, every query goes to the ${datasource}
// variable, panel ids are unique, and every metric and label a query
// names is one the coordinator or the agent registers.
//
// The exported metrics are not listed by hand: the test builds the
// coordinator's and the agent's metric-owning parts with their real
// constructors (as coordinator.Run and agent.Run do) on fresh registries
// and reads every collector's descriptors back.
package dashboards

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent/endpointauth"
	"github.com/shoal-io/shoal/agent/link"
	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/agent/work"
	"github.com/shoal-io/shoal/coordinator/certs"
	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/imagelistpull"
	"github.com/shoal-io/shoal/coordinator/imagepull"
	"github.com/shoal-io/shoal/coordinator/podprobemarker"
	"github.com/shoal-io/shoal/coordinator/podreadiness"
	"github.com/shoal-io/shoal/coordinator/recreate"
	"github.com/shoal-io/shoal/coordinator/sidecarterminator"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/coordinator/webhook"
	"github.com/shoal-io/shoal/imagewarm/node"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/internal/apimetrics"
	"github.com/shoal-io/shoal/internal/queuemetrics"
	"github.com/shoal-io/shoal/probes"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// dashboardGlob finds the dashboards, relative to this package.
const dashboardGlob = "../../deploy/dashboards/*.json"

// repoRoot is the module root, relative to this package.
const repoRoot = "../.."

// datasourceUID is the datasource every panel and query must use: the
// dashboard's datasource template variable.
const datasourceUID = "${datasource}"

// ---------------------------------------------------------------------------
// The dashboards.

// TestDashboards checks every dashboard of deploy/dashboards, one subtest
// per panel (rows and the panels nested in them included).
func TestDashboards(t *testing.T) {
	exported := exportedMetrics(t)
	files, err := filepath.Glob(dashboardGlob)
	require.NoError(t, err)
	require.NotEmpty(t, files, "no dashboards match %s", dashboardGlob)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			d := loadDashboard(t, file)
			require.NotEmpty(t, d.UID, "dashboard uid")
			require.NotEmpty(t, d.Title, "dashboard title")
			// Datasource references are {type, uid} objects from schema 36 on.
			require.GreaterOrEqual(t, d.SchemaVersion, 36, "dashboard schemaVersion")
			requireDatasourceVariable(t, d)

			panels := flatten(d.Panels)
			require.NotEmpty(t, panels, "dashboard has no panels")
			seen := map[int]string{}
			for _, p := range panels {
				prev, dup := seen[p.ID]
				require.False(t, dup, "panel id %d is used by %q and %q", p.ID, prev, p.Title)
				seen[p.ID] = p.Title
			}

			// The panels are the table: one subtest each.
			for _, p := range panels {
				t.Run(fmt.Sprintf("%d %s", p.ID, p.Title), func(t *testing.T) { checkPanel(t, p, exported) })
			}
		})
	}
}

// dashboard is the part of a Grafana dashboard JSON model the test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// panel is a dashboard panel; rows hold their collapsed panels in Panels.
type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	Targets     []target    `json:"targets"`
	Panels      []panel     `json:"panels"`
}

// datasource is a panel's or a target's datasource reference.
type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// target is one query of a panel.
type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *datasource `json:"datasource"`
}

func loadDashboard(t *testing.T, file string) dashboard {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d), "parse %s", file)
	return d
}

// flatten lists panels depth first, rows followed by the panels nested in
// them (a collapsed row holds its panels; an open row has none and its
// panels follow it at the top level).
func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// requireDatasourceVariable requires a Prometheus datasource variable
// named "datasource".
func requireDatasourceVariable(t *testing.T, d dashboard) {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			require.Equal(t, "datasource", v.Type, "the datasource variable's type")
			require.Equal(t, "prometheus", v.Query, "the datasource variable's query (plugin)")
			return
		}
	}
	require.Fail(t, "no datasource template variable", "the dashboard needs a variable named datasource of type datasource")
}

// requireDatasource requires ref to be the Prometheus ${datasource}.
func requireDatasource(t *testing.T, ref *datasource, what string) {
	t.Helper()
	require.NotNil(t, ref, "%s has no datasource", what)
	require.Equal(t, datasourceUID, ref.UID, "%s datasource uid", what)
	require.Equal(t, "prometheus", ref.Type, "%s datasource type", what)
}

// checkPanel checks one panel and every query of it against exported.
func checkPanel(t *testing.T, p panel, exported metricSet) {
	require.NotEmpty(t, strings.TrimSpace(p.Title), "panel %d has no title", p.ID)
	if p.Type == "row" {
		require.Empty(t, p.Targets, "row %q has queries", p.Title)
		return
	}
	require.NotEmpty(t, strings.TrimSpace(p.Description), "panel %q has no description", p.Title)
	require.NotEmpty(t, p.Targets, "panel %q has no queries", p.Title)
	requireDatasource(t, p.Datasource, fmt.Sprintf("panel %q", p.Title))
	var problems []string
	for _, tg := range p.Targets {
		what := fmt.Sprintf("panel %q, query %s", p.Title, tg.RefID)
		requireDatasource(t, tg.Datasource, what)
		require.NotEmpty(t, strings.TrimSpace(tg.Expr), "%s has no expr", what)
		refs, err := extract(tg.Expr)
		require.NoError(t, err, "%s: expr %q", what, tg.Expr)
		require.NotEmpty(t, refs.selectors, "%s: expr %q names no metric", what, tg.Expr)
		for _, msg := range exported.check(refs) {
			problems = append(problems, fmt.Sprintf("%s: %s\n    expr: %s", what, msg, tg.Expr))
		}
	}
	if len(problems) > 0 {
		require.FailNow(t, "queries name metrics or labels Shoal does not export", strings.Join(problems, "\n"))
	}
}

// ---------------------------------------------------------------------------
// The metrics Shoal exports.

// metricSet maps each exported series name (a histogram's _bucket, _sum
// and _count each) to its label names.
type metricSet map[string]map[string]bool

// targetLabels are attached by Prometheus to every scraped series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// check returns what refs names that is not exported.
func (m metricSet) check(refs exprRefs) []string {
	var problems []string
	known, unknown := map[string]bool{}, false
	for _, sel := range refs.selectors {
		labels, ok := m[sel.metric]
		if !ok {
			unknown = true
			msg := fmt.Sprintf("metric %q is not exported by Shoal", sel.metric)
			if _, ok := m[sel.metric+"_count"]; ok {
				msg += fmt.Sprintf(" (it is a histogram or summary: use %[1]s_bucket, %[1]s_sum or %[1]s_count)", sel.metric)
			} else if s := m.closest(sel.metric); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			problems = append(problems, msg)
			continue
		}
		for l := range labels {
			known[l] = true
		}
		for _, l := range sel.labels {
			if !labels[l] && !targetLabels[l] {
				problems = append(problems, fmt.Sprintf("metric %q has no label %q (it has %s)", sel.metric, l, sortedKeys(labels)))
			}
		}
	}
	if unknown {
		return problems // the unknown metric's labels are unknown too
	}
	for _, l := range refs.grouping {
		if !known[l] && !targetLabels[l] {
			problems = append(problems, fmt.Sprintf("grouping label %q is not a label of any metric of the query", l))
		}
	}
	return problems
}

// closest returns the exported name nearest to name, if it is near.
func (m metricSet) closest(name string) string {
	best, dist := "", 4 // at most 3 edits
	for _, n := range sortedKeys(m) {
		if d := editDistance(name, n); d < dist {
			best, dist = n, d
		}
	}
	return best
}

// add records the series a collector's descriptor stands for.
func (m metricSet) add(name string, labels []string, kind collectorKind) {
	set := func(series string, extra ...string) {
		ls := m[series] // a name both programs export keeps both label sets
		if ls == nil {
			ls = map[string]bool{}
			m[series] = ls
		}
		for _, l := range append(slices.Clone(labels), extra...) {
			ls[l] = true
		}
	}
	switch kind {
	case kindHistogram:
		set(name+"_bucket", "le")
		set(name + "_sum")
		set(name + "_count")
	case kindSummary:
		set(name, "quantile")
		set(name + "_sum")
		set(name + "_count")
	default:
		set(name)
	}
}

// handListed are exported metrics the test cannot register, each with the
// file that defines it (TestMetricNamesInSourceAreRegistered requires the
// name there, so a rename is noticed).
//
// shoal_agent_mirror_config: its collector (mirrorSetup) and descriptor
// are unexported in package agent and built only inside agent.Run, which
// needs a container runtime, a state dir, listeners and a coordinator.
var handListed = map[string]struct {
	labels []string
	file   string
}{
	"shoal_agent_mirror_config": {labels: []string{"check"}, file: "agent/imagewarm.go"},
}

// exportedMetrics registers the coordinator's and the agent's metrics on a
// fresh registry each (the two programs' registries) and returns every
// series name they export, with the hand-listed ones.
func exportedMetrics(t *testing.T) metricSet {
	t.Helper()
	m := metricSet{}
	for _, reg := range []*recordingRegisterer{coordinatorMetrics(t), agentMetrics(t)} {
		for _, c := range reg.collectors {
			kind := kindOf(t, c)
			for _, d := range describe(c) {
				name, labels, err := parseDesc(d)
				require.NoError(t, err)
				m.add(name, labels, kind)
			}
		}
	}
	for name, h := range handListed {
		m.add(name, h.labels, kindPlain)
	}
	return m
}

// recordingRegisterer registers collectors on a real registry, as the
// programs do, and remembers them so their descriptors can be read back: a
// Registry does not list what it holds, and Gather leaves out vectors that
// have no children yet.
type recordingRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func newRecordingRegisterer() *recordingRegisterer {
	return &recordingRegisterer{Registry: prometheus.NewRegistry()}
}

// Register registers c on the registry and records it.
func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers cs, panicking on an error as the Registry does.
func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// coordinatorMetrics builds every part of the coordinator that registers
// metrics, with the options coordinator.Run passes (fake clients and
// informers that never start stand in for the cluster).
func coordinatorMetrics(t *testing.T) *recordingRegisterer {
	t.Helper()
	reg := newRecordingRegisterer()
	isLeader := func() bool { return true }
	must := func(what string, err error) {
		t.Helper()
		require.NoError(t, err, "register the %s metrics", what)
	}

	// The prefix coordinator.Run gives apimetrics.New.
	_, err := apimetrics.New("shoal_coordinator", reg)
	must("API request", err)
	must("work queue", queuemetrics.Register("shoal_coordinator", reg))
	_, err = certs.NewManager(&certs.Authority{}, isLeader, reg)
	must("CA expiry", err)
	writer, err := statuswriter.New(statuswriter.Options{Registerer: reg})
	must("status writer", err)
	store := dispatch.NewStore()
	dispatch.NewServer(dispatch.ServerOptions{Store: store, IsLeader: isLeader, Registerer: reg})

	kube, shoal := kubefake.NewClientset(), shoalfake.NewSimpleClientset()
	ki := kubeinformers.NewSharedInformerFactory(kube, 0)
	si := shoalinformers.NewSharedInformerFactory(shoal, 0)
	pods, nodes := ki.Core().V1().Pods().Informer(), ki.Core().V1().Nodes().Informer()
	recorder := events.NewFakeRecorder(0)

	_, err = recreate.New(recreate.Options{
		Client: kube, Shoal: shoal,
		Requests: si.Apps().V1alpha1().ContainerRecreateRequests().Informer(), Pods: pods,
		Store: store, Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	must("ContainerRecreateRequest", err)
	_, err = sidecarterminator.New(sidecarterminator.Options{
		Client: kube, Pods: pods, Nodes: nodes, Store: store,
		IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	must("sidecar terminator", err)
	_, err = podprobemarker.New(podprobemarker.Options{
		Client: kube, Shoal: shoal,
		Markers: si.Apps().V1alpha1().PodProbeMarkers().Informer(), Pods: pods,
		Store: store, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	must("PodProbeMarker", err)
	_, err = podreadiness.New(podreadiness.Options{Client: kube, Pods: pods, IsLeader: isLeader, Registerer: reg})
	must("pod readiness", err)
	_, err = imagepull.New(imagepull.Options{
		Client: kube, Shoal: shoal,
		Jobs: si.Apps().V1alpha1().ImagePullJobs().Informer(), Nodes: nodes, Pods: pods,
		Store: store, Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	must("ImagePullJob", err)
	_, err = imagelistpull.New(imagelistpull.Options{
		Shoal:  shoal,
		Lists:  si.Apps().V1alpha1().ImageListPullJobs().Informer(),
		Jobs:   si.Apps().V1alpha1().ImagePullJobs().Informer(),
		Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	must("ImageListPullJob", err)

	webhook.NewServer(nil, reg)
	webhook.NewPodUnavailableBudgetAdmission(nil, nil, nil, reg)
	webhook.NewDeletionProtection(nil, reg)
	return reg
}

// agentMetrics builds every part of the agent that registers metrics, as
// agent.Run does, without starting any of them.
func agentMetrics(t *testing.T) *recordingRegisterer {
	t.Helper()
	reg := newRecordingRegisterer()
	log := klog.Background()

	_, err := mesh.New(mesh.Config{NodeName: "node-1", Registerer: reg}, log)
	require.NoError(t, err, "register the mesh metrics")

	store, err := state.Open(t.TempDir())
	require.NoError(t, err, "open a state dir for the work runner")
	t.Cleanup(func() { _ = store.Close() })
	reg.MustRegister(work.New(store, nil, log))

	probes.New(nil, probes.WithRegisterer(reg))
	link.New(link.Config{Registerer: reg})
	(&endpointauth.Guard{Registerer: reg}).Protect(http.NotFoundHandler())
	_, err = peertls.NewIdentity(peertls.Options{Node: "node-1", Registerer: reg})
	require.NoError(t, err, "register the peer TLS metrics")

	// The image swarm: tracker, tracker client, fetcher and blob server.
	n, err := node.New(node.Config{
		Name: "node-1", Listener: stubListener{}, StoreDir: t.TempDir(),
		Members:    tracker.MembersFunc(func() []placement.Member { return nil }),
		Registerer: reg, Logger: log,
	})
	require.NoError(t, err, "register the image swarm metrics")
	t.Cleanup(func() { _ = n.Store().Close() })
	return reg
}

// stubListener stands in for the swarm's peer listener: node.New only
// reads its address.
type stubListener struct{}

func (stubListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (stubListener) Close() error              { return nil }
func (stubListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30020} }

// collectorKind tells which series a collector's descriptors stand for.
type collectorKind int

const (
	kindPlain     collectorKind = iota // counters, gauges, custom collectors: the name itself
	kindHistogram                      // <name>_bucket (with le), _sum, _count
	kindSummary                        // <name> (with quantile), _sum, _count
)

// kindOf tells histograms and summaries from the rest by their Go type.
// Custom collectors count as plain; one that emits a histogram would make
// a query of its _bucket series fail here, loudly, never pass wrongly.
func kindOf(t *testing.T, c prometheus.Collector) collectorKind {
	t.Helper()
	switch c := c.(type) {
	case *prometheus.HistogramVec:
		return kindHistogram
	case *prometheus.SummaryVec:
		return kindSummary
	case prometheus.Histogram: // also matches a Summary: the same methods
		var m dto.Metric
		require.NoError(t, c.Write(&m), "write %s", c.Desc())
		if m.GetSummary() != nil {
			return kindSummary
		}
		return kindHistogram
	}
	return kindPlain
}

// describe returns c's descriptors.
func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// descPattern matches Desc.String(): Desc{fqName: "...", help: "...",
// unit: "...", constLabels: {k="v",...}, variableLabels: {a,c(b),...}}.
// help is quoted and may hold anything, so the label parts are taken from
// the end.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: .*, constLabels: \{(.*)\}, variableLabels: \{([^{}]*)\}\}$`)

// constLabelPattern matches one k="v" pair of constLabels.
var constLabelPattern = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)

// parseDesc returns a descriptor's metric name and label names (constant
// and variable).
func parseDesc(d *prometheus.Desc) (string, []string, error) {
	s := d.String()
	m := descPattern.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return "", nil, fmt.Errorf("parse metric descriptor %s: unexpected format", s)
	}
	var labels []string
	for _, c := range constLabelPattern.FindAllStringSubmatch(m[2], -1) {
		labels = append(labels, c[1])
	}
	for _, v := range strings.Split(m[3], ",") {
		// A label with a constraint shows as c(name).
		v = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v), "c("), ")")
		if v != "" {
			labels = append(labels, v)
		}
	}
	return m[1], labels, nil
}

// TestParseDesc checks that descriptor strings are read back right.
func TestParseDesc(t *testing.T) {
	for _, tc := range []struct {
		name   string
		desc   *prometheus.Desc
		metric string
		labels []string
	}{
		{"no labels", prometheus.NewDesc("a_total", `help with "quotes", {braces} and constLabels: {x}`, nil, nil), "a_total", nil},
		{"variable", prometheus.NewDesc("b", "h", []string{"kind", "state"}, nil), "b", []string{"kind", "state"}},
		{"constant", prometheus.NewDesc("c", "h", []string{"v"}, prometheus.Labels{"k": `x,"}y`}), "c", []string{"k", "v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, labels, err := parseDesc(tc.desc)
			require.NoError(t, err)
			require.Equal(t, tc.metric, name)
			require.Equal(t, tc.labels, labels)
		})
	}
}

// metricLiteral matches a complete Shoal metric name in Go source.
var metricLiteral = regexp.MustCompile(`"(shoal_(?:agent|coordinator)_[a-z0-9_]+)"`)

// TestMetricNamesInSourceAreRegistered keeps exportedMetrics complete:
// every metric name spelled out in Shoal's non-test Go code must be among
// the metrics the test registers, so a package whose metrics it does not
// build yet is noticed (names assembled from a namespace and subsystem,
// like the swarm's, are not seen here; their package is registered).
func TestMetricNamesInSourceAreRegistered(t *testing.T) {
	exported := exportedMetrics(t)
	found := map[string]string{} // name -> file
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return fmt.Errorf("relative path of %s: %w", path, err)
		}
		if d.IsDir() {
			// test/ and hack/ hold tests, benchmarks and tools, not the
			// programs whose metrics dashboards show.
			if rel == "test" || rel == "hack" || rel == "bin" || (rel != "." && strings.HasPrefix(d.Name(), ".")) ||
				d.Name() == "testdata" || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		for _, m := range metricLiteral.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = filepath.ToSlash(rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, found, "no metric names found under %s", repoRoot)
	for _, name := range sortedKeys(found) {
		t.Run(name, func(t *testing.T) {
			_, ok := exported[name]
			if !ok {
				_, ok = exported[name+"_count"] // a histogram or summary
			}
			require.True(t, ok, "%s (named in %s) is not registered by this test: build its package in "+
				"coordinatorMetrics or agentMetrics", name, found[name])
		})
	}
	for name, h := range handListed {
		require.Equal(t, h.file, found[name], "hand-listed metric %s is no longer defined in %s", name, h.file)
	}
}

// ---------------------------------------------------------------------------
// Metric names in PromQL.
//
// github.com/prometheus/prometheus (and its PromQL parser) is not a
// dependency of Shoal, so queries are read by the small scanner below. It
// knows just enough PromQL to find what a query refers to:
//
//   - an identifier followed by "(" is a function (it must be a PromQL
//     function: a misspelt one is an error);
//   - aggregation operators (sum, max, topk, ...), binary and set
//     operators (and, or, unless), modifiers (bool, offset) and the
//     grouping keywords are not metrics; the labels listed after by,
//     without, on, ignoring, group_left and group_right are grouping
//     labels;
//   - every other identifier is a metric name: a bare selector, or one
//     followed by label matchers "{...}" (whose label names are recorded)
//     and/or a range "[...]";
//   - strings, numbers and durations, ranges and subqueries "[...]",
//     comments, and Grafana variables ($__rate_interval, ${datasource})
//     are skipped.
//
// Selectors without a metric name ({__name__="..."}) are rejected:
// dashboards name their metrics.

// exprRefs is what one PromQL expression refers to.
type exprRefs struct {
	selectors []selector
	grouping  []string
}

// selector is a metric name with the label names of its matchers.
type selector struct {
	metric string
	labels []string
}

// promqlFunctions are PromQL's functions.
var promqlFunctions = setOf(
	"abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time",
	"ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month",
	"day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "double_exponential_smoothing", "end",
	"exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
	"histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase", "info",
	"irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time",
	"max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear", "present_over_time",
	"quantile_over_time", "rad", "rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label",
	"sort_by_label_desc", "sort_desc", "sqrt", "start", "stddev_over_time", "stdvar_over_time", "sum_over_time",
	"tan", "tanh", "time", "timestamp", "vector", "year",
)

// promqlAggregations are PromQL's aggregation operators.
var promqlAggregations = setOf(
	"avg", "bottomk", "count", "count_values", "group", "limit_ratio", "limitk", "max", "min", "quantile",
	"stddev", "stdvar", "sum", "topk",
)

// promqlKeywords are PromQL's other keywords (and the number literals Inf
// and NaN).
var promqlKeywords = setOf("and", "or", "unless", "atan2", "bool", "offset", "inf", "nan")

// promqlGrouping are the keywords followed by a list of labels.
var promqlGrouping = setOf("by", "without", "on", "ignoring", "group_left", "group_right")

// extract returns the metrics, matcher labels and grouping labels of a
// PromQL expression.
func extract(expr string) (exprRefs, error) {
	var refs exprRefs
	last := -1 // the selector a "{" may follow, -1 when none
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++ // "metric {...}" is allowed: last stays
			continue
		case c == '#': // a comment, to the end of the line
			if j := strings.IndexByte(expr[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(expr)
			}
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(expr, i)
			if err != nil {
				return refs, err
			}
			i = j
		case c == '$': // a Grafana variable: $name or ${name...}
			i = skipVariable(expr, i)
		case c == '[': // a range or a subquery: durations and variables
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return refs, fmt.Errorf("unclosed [ at offset %d", i)
			}
			i += j + 1
		case c == '{':
			if last < 0 {
				return refs, fmt.Errorf("label matchers without a metric name at offset %d", i)
			}
			labels, j, err := matchers(expr, i)
			if err != nil {
				return refs, err
			}
			refs.selectors[last].labels = append(refs.selectors[last].labels, labels...)
			i = j
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			i = skipNumber(expr, i)
		case isIdentStart(c):
			j := identEnd(expr, i)
			word, lower := expr[i:j], strings.ToLower(expr[i:j])
			i = j
			next := nextNonSpace(expr, i)
			switch {
			case promqlGrouping[lower]:
				if next == '(' {
					labels, j, err := labelList(expr, i)
					if err != nil {
						return refs, err
					}
					refs.grouping = append(refs.grouping, labels...)
					i = j
				}
			case promqlAggregations[lower] || promqlKeywords[lower]:
			case next == '(':
				if !promqlFunctions[word] {
					return refs, fmt.Errorf("unknown PromQL function %q", word)
				}
			default:
				refs.selectors = append(refs.selectors, selector{metric: word})
				last = len(refs.selectors) - 1
				continue
			}
		default: // operators, parentheses, commas, @
			i++
		}
		last = -1
	}
	return refs, nil
}

// matchers reads the label matchers "{a="x", b=~"y"}" at expr[i] and
// returns their label names and the offset after the "}".
func matchers(expr string, i int) ([]string, int, error) {
	var labels []string
	i++ // the {
	for {
		i = skipSpace(expr, i)
		if i >= len(expr) {
			return nil, i, errors.New("unclosed {")
		}
		switch c := expr[i]; {
		case c == '}':
			return labels, i + 1, nil
		case c == ',':
			i++
			continue
		case !isIdentStart(c):
			return nil, i, fmt.Errorf("expected a label name at offset %d", i)
		}
		j := identEnd(expr, i)
		labels = append(labels, expr[i:j])
		i = skipSpace(expr, j)
		op := ""
		for _, o := range []string{"!=", "=~", "!~", "="} {
			if strings.HasPrefix(expr[i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, i, fmt.Errorf("expected a matcher operator after label %q at offset %d", expr[j:i], i)
		}
		i = skipSpace(expr, i+len(op))
		if i >= len(expr) || (expr[i] != '"' && expr[i] != '\'' && expr[i] != '`') {
			return nil, i, fmt.Errorf("expected a string after %s at offset %d", op, i)
		}
		var err error
		if i, err = skipString(expr, i); err != nil {
			return nil, i, err
		}
	}
}

// labelList reads "(a, b)" after a grouping keyword and returns the label
// names and the offset after the ")".
func labelList(expr string, i int) ([]string, int, error) {
	i = skipSpace(expr, i) + 1 // the (
	var labels []string
	for {
		i = skipSpace(expr, i)
		if i >= len(expr) {
			return nil, i, errors.New("unclosed label list")
		}
		switch c := expr[i]; {
		case c == ')':
			return labels, i + 1, nil
		case c == ',':
			i++
		case isIdentStart(c):
			j := identEnd(expr, i)
			labels = append(labels, expr[i:j])
			i = j
		default:
			return nil, i, fmt.Errorf("unexpected %q in a label list at offset %d", c, i)
		}
	}
}

// skipString returns the offset after the string literal at expr[i].
func skipString(expr string, i int) (int, error) {
	quote := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case '\\':
			if quote != '`' {
				j++ // the escaped character
			}
		case quote:
			return j + 1, nil
		}
	}
	return len(expr), fmt.Errorf("unclosed string at offset %d", i)
}

// skipVariable returns the offset after the Grafana variable at expr[i].
func skipVariable(expr string, i int) int {
	i++ // the $
	if i < len(expr) && expr[i] == '{' {
		if j := strings.IndexByte(expr[i:], '}'); j >= 0 {
			return i + j + 1
		}
		return len(expr)
	}
	for i < len(expr) && isIdentChar(expr[i]) {
		i++
	}
	return i
}

// skipNumber returns the offset after the number or duration at expr[i]
// (0.95, 1e-3, 0x1f, 5m, 1h30m).
func skipNumber(expr string, i int) int {
	for i < len(expr) {
		c := expr[i]
		switch {
		case isIdentChar(c) || c == '.':
			i++
		case (c == '+' || c == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E'):
			i++
		default:
			return i
		}
	}
	return i
}

func skipSpace(expr string, i int) int {
	for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
		i++
	}
	return i
}

// nextNonSpace returns the first character at or after i that is not a
// space, or 0.
func nextNonSpace(expr string, i int) byte {
	if i = skipSpace(expr, i); i < len(expr) {
		return expr[i]
	}
	return 0
}

func identEnd(expr string, i int) int {
	for i < len(expr) && isIdentChar(expr[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// TestExtract checks the PromQL scanner on the constructs dashboards use.
func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expr      string
		selectors []selector
		grouping  []string
		err       string
	}{
		{name: "bare", expr: "up", selectors: []selector{{metric: "up"}}},
		{
			name:      "rate with matchers and Grafana interval",
			expr:      `sum by (verb) (rate(x_total{verb=~"POST|PUT", code!="2\"00"}[$__rate_interval]))`,
			selectors: []selector{{metric: "x_total", labels: []string{"verb", "code"}}},
			grouping:  []string{"verb"},
		},
		{
			name:      "histogram quantile",
			expr:      "histogram_quantile(0.99, sum by (le, path) (rate(h_bucket[5m])))",
			selectors: []selector{{metric: "h_bucket"}},
			grouping:  []string{"le", "path"},
		},
		{
			name:      "binary and set operators, numbers, offset",
			expr:      "sum(a) / sum(b offset 1h) or vector(0) and on(kind) c{kind='x'} > 1e-3",
			selectors: []selector{{metric: "a"}, {metric: "b"}, {metric: "c", labels: []string{"kind"}}},
			grouping:  []string{"kind"},
		},
		{
			name:      "aggregation with grouping after, without, topk, subquery",
			expr:      "topk(3, max(sum without (state) (m{state=\"a\"})) by (kind)) + max_over_time(n[1h:5m])",
			selectors: []selector{{metric: "m", labels: []string{"state"}}, {metric: "n"}},
			grouping:  []string{"state", "kind"},
		},
		{name: "unknown function", expr: "rat(x[5m])", err: `unknown PromQL function "rat"`},
		{name: "nameless selector", expr: `{__name__="x"}`, err: "without a metric name"},
		{name: "unclosed matchers", expr: `x{a="b"`, err: "unclosed {"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, err := extract(tc.expr)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.selectors, refs.selectors)
			require.Equal(t, tc.grouping, refs.grouping)
		})
	}
}

// ---------------------------------------------------------------------------
// Helpers.

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
