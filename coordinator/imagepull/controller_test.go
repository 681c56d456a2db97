package imagepull

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// fakeWriter is a status writer the test drives: it keeps the latest
// write per key until flush.
type fakeWriter struct {
	mu       sync.Mutex
	pending  map[string]statuswriter.WriteFunc
	enqueued int
}

func (f *fakeWriter) Enqueue(key string, w statuswriter.WriteFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[key] = w
	f.enqueued++
}

func (f *fakeWriter) EnqueueFinal(key string, w statuswriter.WriteFunc) { f.Enqueue(key, w) }

// flush runs the waiting writes, as the real writer would at its next
// turn.
func (f *fakeWriter) flush(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	pending := f.pending
	f.pending = map[string]statuswriter.WriteFunc{}
	f.mu.Unlock()
	for key, w := range pending {
		require.NoError(t, w(context.Background()), key)
	}
}

func (f *fakeWriter) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

type harness struct {
	t        *testing.T
	kube     *kubefake.Clientset
	shoal    *shoalfake.Clientset
	store    *dispatch.Store
	writer   *fakeWriter
	recorder *events.FakeRecorder
	clock    *clocktesting.FakeClock
	reg      *prometheus.Registry
	c        *Controller

	mu           sync.Mutex
	leader       bool
	statusWrites int
	seen         []string // Events
}

func testNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// start runs a controller over fake clients holding kubeObjs and jobs
// until the test ends.
func start(t *testing.T, leader bool, kubeObjs []runtime.Object, jobs ...*v1alpha1.ImagePullJob) *harness {
	t.Helper()
	h := &harness{t: t, kube: kubefake.NewClientset(kubeObjs...), shoal: shoalfake.NewSimpleClientset(), store: dispatch.NewStore(),
		writer: &fakeWriter{pending: map[string]statuswriter.WriteFunc{}}, recorder: events.NewFakeRecorder(1000),
		clock: clocktesting.NewFakeClock(t0), reg: prometheus.NewRegistry(), leader: leader}
	// Like the apiserver, an update of the status subresource changes the
	// status only.
	h.shoal.PrependReactor("update", "imagepulljobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		h.mu.Lock()
		h.statusWrites++
		h.mu.Unlock()
		in := u.GetObject().(*v1alpha1.ImagePullJob)
		cur, err := h.shoal.Tracker().Get(a.GetResource(), a.GetNamespace(), in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*v1alpha1.ImagePullJob).DeepCopy()
		out.Status = in.Status
		return true, out, h.shoal.Tracker().Update(a.GetResource(), out, a.GetNamespace())
	})
	for _, j := range jobs {
		_, err := h.shoal.AppsV1alpha1().ImagePullJobs(j.Namespace).Create(context.Background(), j, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ki := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	si := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	c, err := New(Options{
		Client: h.kube, Shoal: h.shoal,
		Jobs: si.Apps().V1alpha1().ImagePullJobs().Informer(), Nodes: ki.Core().V1().Nodes().Informer(), Pods: ki.Core().V1().Pods().Informer(),
		Store: h.store, Writer: h.writer, Recorder: h.recorder, Registerer: h.reg, Clock: h.clock,
		IsLeader: func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.leader },
	})
	require.NoError(t, err)
	c.minSyncGap, c.progressGap = 0, 0
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	ki.Start(ctx.Done())
	si.Start(ctx.Done())
	go func() { defer close(done); _ = c.Run(ctx) }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	return h
}

// eventually polls cond for up to 10 s, running the waiting status writes
// between tries.
func (h *harness) eventually(cond func() bool, msg string, args ...any) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.writer.flush(h.t)
		return cond()
	}, 10*time.Second, 5*time.Millisecond, append([]any{msg}, args...)...)
}

func (h *harness) setLeader(v bool) {
	h.mu.Lock()
	h.leader = v
	h.mu.Unlock()
}

func (h *harness) writes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statusWrites
}

func (h *harness) job(name string) *v1alpha1.ImagePullJob {
	h.t.Helper()
	j, err := h.shoal.AppsV1alpha1().ImagePullJobs("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(h.t, err)
	return j
}

func (h *harness) item(node, name string) (*nodeworkv1.WorkItem, *nodeworkv1.WorkReport) {
	return h.store.Item(node, nodework.PullID("default", name))
}

func (h *harness) holds(name string, nodes ...string) bool {
	for _, n := range nodes {
		if it, _ := h.item(n, name); it == nil {
			return false
		}
	}
	return true
}

// holders lists which of nodes hold the job's work.
func (h *harness) holders(name string, nodes ...string) []string {
	var out []string
	for _, n := range nodes {
		if it, _ := h.item(n, name); it != nil {
			out = append(out, n)
		}
	}
	return out
}

// report sends an agent's report on the node's current work.
func (h *harness) report(node, name string, phase nodeworkv1.Phase, msg string, pull *nodeworkv1.PullStatus) {
	h.t.Helper()
	it, _ := h.item(node, name)
	require.NotNil(h.t, it, "%s holds %s", node, name)
	h.store.Report(node, &nodeworkv1.WorkReport{Id: it.GetId(), ObservedGeneration: it.GetGeneration(), Kind: nodework.KindPull,
		Phase: phase, Message: msg, Status: &nodeworkv1.WorkReport_Pull{Pull: pull}})
}

// events returns every Event recorded so far.
func (h *harness) events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		select {
		case e := <-h.recorder.Events:
			h.seen = append(h.seen, e)
		default:
			return append([]string(nil), h.seen...)
		}
	}
}

// waitEvent waits until an Event containing text was recorded.
func (h *harness) waitEvent(text string) {
	h.t.Helper()
	h.eventually(func() bool { return strings.Contains(strings.Join(h.events(), "\n"), text) }, "an Event %q", text)
}

func nodesObjs(names ...string) []runtime.Object {
	var out []runtime.Object
	for _, n := range names {
		out = append(out, testNode(n, map[string]string{"pool": "a"}))
	}
	return out
}

func TestControllerPullsAndCompletes(t *testing.T) {
	job := testJob(2)
	job.Spec.CompletionPolicy.TTLSecondsAfterFinished = ptr.To[int32](30)
	h := start(t, true, nodesObjs("n0", "n1", "n2"), job)

	h.eventually(func() bool { return h.holds("warm", "n0", "n1") }, "the first two nodes get work")
	require.False(t, h.holds("warm", "n2"), "parallelism 2")
	it, _ := h.item("n0", "warm")
	require.Equal(t, nodework.KindPull, it.GetKind())
	require.Equal(t, "index.docker.io/library/nginx:1.25", it.GetPull().GetImage())
	require.Equal(t, int32(600), it.GetPull().GetTimeoutSeconds())
	h.eventually(func() bool { return h.job("warm").Status.Desired == 3 }, "status written")
	st := h.job("warm").Status
	require.Equal(t, [4]int32{3, 2, 0, 0}, counts(st))
	require.Equal(t, "job is running, progress 0.0%", st.Message)
	require.Equal(t, &metav1.Time{Time: t0}, st.StartTime)

	h.report("n0", "warm", succeeded, "", &nodeworkv1.PullStatus{PullMillis: 1500, BytesDone: 10 << 20, BytesTotal: 10 << 20, ImageId: "sha256:abc"})
	h.eventually(func() bool { return h.holds("warm", "n2") }, "n0's slot goes to n2")
	require.True(t, h.holds("warm", "n0"), "finished work stays while the job runs")
	h.report("n1", "warm", succeeded, "", &nodeworkv1.PullStatus{Present: true})
	h.report("n2", "warm", failed, "manifest unknown", nil)

	h.eventually(func() bool { return h.job("warm").Status.CompletionTime != nil }, "completed")
	st = h.job("warm").Status
	require.Equal(t, [4]int32{3, 0, 2, 1}, counts(st))
	require.Equal(t, []string{"n2"}, st.FailedNodes)
	require.Equal(t, "job has completed", st.Message)
	h.eventually(func() bool { return len(h.holders("warm", "n0", "n1", "n2")) == 0 }, "a finished job's work is removed")
	view, ok := h.c.Nodes("default", "warm")
	require.True(t, ok)
	require.Len(t, view.Nodes, 3)
	require.Equal(t, []string{pullview.PhaseSucceeded, pullview.PhaseSucceeded, pullview.PhaseFailed}, []string{view.Nodes[0].Phase, view.Nodes[1].Phase, view.Nodes[2].Phase},
		"the view keeps the final states")
	require.Equal(t, "sha256:abc", view.Nodes[0].ImageID)
	require.True(t, view.Nodes[1].Present)
	require.Equal(t, "manifest unknown", view.Nodes[2].Message)

	h.waitEvent("Normal Completed pulled on 2 nodes, failed on 1")
	evs := strings.Join(h.events(), "\n")
	require.Contains(t, evs, "Normal Started Pulling index.docker.io/library/nginx:1.25 on 3 nodes, at most 2 at a time")
	require.Contains(t, evs, "Warning PullImageFailed Failed to pull index.docker.io/library/nginx:1.25 on node n2: manifest unknown")
	require.Contains(t, evs, "Normal Completed pulled on 2 nodes, failed on 1")
	require.Equal(t, 3, strings.Count(evs, "\n")+1, "no Event per successful node: %s", evs)

	require.Equal(t, 1.0, testutil.ToFloat64(h.c.metrics.completed.WithLabelValues("failed")))
	require.Equal(t, float64(10<<20), testutil.ToFloat64(h.c.metrics.bytes), "the pull, not the image already present")
	require.Equal(t, 1, testutil.CollectAndCount(h.c.metrics.pullSeconds))

	// ttlSecondsAfterFinished counts from the completion time.
	var deletedAt time.Time
	h.shoal.PrependReactor("delete", "imagepulljobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		deletedAt = h.clock.Now()
		return false, nil, nil
	})
	h.eventually(func() bool {
		h.clock.Step(time.Second)
		return h.job("warm") == nil
	}, "deleted after its TTL")
	require.False(t, deletedAt.Before(st.CompletionTime.Add(30*time.Second)), "not before the TTL: %s", deletedAt)
}

func TestControllerCoalescesStatusWrites(t *testing.T) {
	h := start(t, true, nodesObjs("n0", "n1", "n2", "n3", "n4"), testJob(5))
	h.eventually(func() bool { return h.holds("warm", "n0", "n1", "n2", "n3", "n4") && h.job("warm").Status.Active == 5 }, "all pulling")
	base := h.writes()
	require.Equal(t, 1, base, "one write for the start")

	// Many reports between two turns of the writer are one write.
	for i := range 20 {
		for _, n := range []string{"n0", "n1", "n2", "n3", "n4"} {
			h.report(n, "warm", running, "", &nodeworkv1.PullStatus{BytesDone: int64(i+1) << 20, BytesTotal: 100 << 20})
		}
	}
	want := "job is running, progress 0.0% (5 pulling: 100 MiB of 500 MiB)"
	require.Eventually(t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		st := h.c.states["default/warm"]
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.status != nil && st.status.Message == want
	}, 10*time.Second, 5*time.Millisecond, "the last reports decided")
	require.Equal(t, 1, h.writer.waiting(), "one write waits for the job")
	h.writer.flush(t)
	require.Equal(t, base+1, h.writes())
	h.eventually(func() bool { return h.job("warm").Status.Message == want }, "written")

	// Nothing changed: nothing written.
	h.report("n0", "warm", running, "", &nodeworkv1.PullStatus{BytesDone: 20 << 20, BytesTotal: 100 << 20})
	h.eventually(func() bool { return h.job("warm").Status.Message == want }, "same status")
	h.writer.flush(t)
	require.Equal(t, base+1, h.writes(), "the same status is not written again")
}

func TestControllerEventsOfManyFailures(t *testing.T) {
	var nodes []string
	for i := range 12 {
		nodes = append(nodes, fmt.Sprintf("n%02d", i))
	}
	h := start(t, true, nodesObjs(nodes...), testJob(12))
	h.eventually(func() bool { return h.holds("warm", nodes...) }, "all dispatched")
	for _, n := range nodes {
		h.report(n, "warm", failed, "unauthorized", nil)
	}
	h.eventually(func() bool { return h.job("warm").Status.CompletionTime != nil }, "completed")
	h.waitEvent("Normal Completed pulled on 0 nodes, failed on 12")
	evs := h.events()
	var failures []string
	for _, e := range evs {
		if strings.Contains(e, "PullImageFailed") {
			failures = append(failures, e)
		}
	}
	require.Len(t, failures, 11, "ten one by one, then one summary: %v", failures)
	require.Contains(t, failures[10], "More than 10 nodes failed to pull")
	require.Len(t, h.job("warm").Status.FailedNodes, 12)
}

func TestControllerSecrets(t *testing.T) {
	secret := dockerConfigJSON("reg", `{"registry.example.com":{"username":"u","password":"one"}}`)
	job := testJob(3)
	job.Spec.Image = "registry.example.com/team/app:1"
	job.Spec.PullSecrets = []string{"missing", "reg"}
	objs := append(nodesObjs("n0", "n1", "n2", "n3"), secret)
	h := start(t, true, objs, job)

	h.eventually(func() bool { return h.holds("warm", "n0", "n1", "n2") }, "dispatched")
	password := func(node string) string {
		it, _ := h.item(node, "warm")
		require.NotNil(t, it, node)
		require.Len(t, it.GetPull().GetAuths(), 1, node)
		return it.GetPull().GetAuths()[0].GetPassword()
	}
	require.Equal(t, "one", password("n0"))
	require.False(t, h.holds("warm", "n3"), "only nodes that pull get the credentials")
	h.waitEvent("Warning SecretNotFound Pull secret default/missing does not exist; pulling without it. Create it in namespace default")

	h.report("n0", "warm", succeeded, "", nil)
	h.report("n1", "warm", running, "", nil)
	h.report("n2", "warm", failed, "unauthorized", nil)
	h.eventually(func() bool { return h.holds("warm", "n3") }, "n3 gets the free slot")
	gen0, _ := h.item("n0", "warm")
	cur := h.job("warm")
	cur.Spec.Parallelism = ptr.To(intstr.FromInt32(2))
	_, err := h.shoal.AppsV1alpha1().ImagePullJobs("default").Update(context.Background(), cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.eventually(func() bool {
		j, ok, _ := h.c.jobs.GetByKey("default/warm")
		return ok && parallelism(j.(*v1alpha1.ImagePullJob)) == 2
	}, "parallelism 2: n1 and n3 fill it")

	// The secret rotates: unfinished work moves to the new password within
	// about ten seconds; the finished pull stays as it was.
	secret = secret.DeepCopy()
	secret.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"registry.example.com":{"username":"u","password":"two"}}}`)
	_, err = h.kube.CoreV1().Secrets("default").Update(context.Background(), secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.clock.Step(secretTTL)
	h.eventually(func() bool { return password("n1") == "two" && password("n3") == "two" }, "running work gets the new password")
	it, rep := h.item("n0", "warm")
	require.Same(t, gen0, it, "the finished pull is not redone")
	require.Equal(t, succeeded, rep.GetPhase())
	require.Equal(t, "one", password("n2"), "the failed node waits for a slot")
	h.report("n1", "warm", succeeded, "", nil)
	h.eventually(func() bool { return password("n2") == "two" }, "then retries with the new password")
	it, rep = h.item("n2", "warm")
	require.NotEqual(t, it.GetGeneration(), rep.GetObservedGeneration(), "a new generation: no report on it yet")
}

func TestControllerNodesHandler(t *testing.T) {
	h := start(t, true, nodesObjs("n0", "n1", "n2"), testJob(2))
	h.eventually(func() bool { return h.holds("warm", "n0", "n1") }, "dispatched")
	h.report("n0", "warm", succeeded, "", &nodeworkv1.PullStatus{Attempts: 1, ImageId: "sha256:abc", BytesDone: 5, BytesTotal: 5})
	h.eventually(func() bool { return h.holds("warm", "n2") }, "n2 dispatched")
	h.report("n1", "warm", running, "", &nodeworkv1.PullStatus{Attempts: 2, BytesDone: 1, BytesTotal: 5, Shared: true})
	h.eventually(func() bool {
		v, _ := h.c.Nodes("default", "warm")
		return len(v.Nodes) == 3 && v.Nodes[1].Phase == pullview.PhasePulling
	}, "view up to date")

	srv := httptest.NewServer(h.c.NodesHandler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var b strings.Builder
		_, err = fmt.Fprint(&b, readAll(t, resp))
		require.NoError(t, err)
		return resp.StatusCode, b.String()
	}
	code, body := get(pullview.NodesPathPrefix + "default/warm")
	require.Equal(t, http.StatusOK, code, body)
	var view pullview.JobNodes
	require.NoError(t, json.Unmarshal([]byte(body), &view))
	require.Equal(t, "warm", view.Name)
	require.Equal(t, "index.docker.io/library/nginx:1.25", view.Image)
	require.Equal(t, []pullview.NodeState{
		{Node: "n0", Phase: pullview.PhaseSucceeded, Attempts: 1, ImageID: "sha256:abc", BytesDone: 5, BytesTotal: 5, Since: t0},
		{Node: "n1", Phase: pullview.PhasePulling, Attempts: 2, BytesDone: 1, BytesTotal: 5, Shared: true, Since: t0},
		{Node: "n2", Phase: pullview.PhaseUnknown, Since: t0},
	}, normalize(view.Nodes))
	require.NotContains(t, body, "auth", "no credentials in the view")

	code, _ = get(pullview.NodesPathPrefix + "default/other")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(pullview.NodesPathPrefix + "default")
	require.Equal(t, http.StatusNotFound, code)
	h.setLeader(false)
	code, _ = get(pullview.NodesPathPrefix + "default/warm")
	require.Equal(t, http.StatusServiceUnavailable, code)
}

// normalize makes times comparable after a JSON round trip.
func normalize(nodes []pullview.NodeState) []pullview.NodeState {
	for i := range nodes {
		nodes[i].Since = nodes[i].Since.UTC()
	}
	return nodes
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestControllerFailover(t *testing.T) {
	// The previous leader handed out n0..n2 one at a time (two finished)
	// and wrote so; this replica is a standby.
	job := testJob(1)
	job.Status = v1alpha1.ImagePullJobStatus{StartTime: &metav1.Time{Time: t0.Add(-time.Hour)}, Desired: 4, Active: 1, Succeeded: 1, Failed: 1,
		FailedNodes: []string{"n1"}, Message: "job is running, progress 50.0%"}
	h := start(t, false, nodesObjs("n0", "n1", "n2", "n3"), job)
	h.eventually(func() bool { return h.holds("warm", "n0", "n1", "n2") }, "the standby holds what the leader handed out")
	require.False(t, h.holds("warm", "n3"))
	require.Zero(t, h.writer.waiting(), "a standby writes nothing")
	require.Empty(t, h.events())
	items := map[string]*nodeworkv1.WorkItem{}
	for _, n := range []string{"n0", "n1", "n2"} {
		items[n], _ = h.item(n, "warm")
	}

	// It leads: the agents reconnect and report the same spec again.
	h.setLeader(true)
	h.c.Resync()
	h.report("n0", "warm", succeeded, "", nil)
	h.report("n1", "warm", failed, "denied", nil)
	h.report("n2", "warm", running, "", nil)
	h.eventually(func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return h.c.states["default/warm"].lastReport["n2"].phase == running
	}, "reports seen")
	h.eventually(func() bool {
		v, _ := h.c.Nodes("default", "warm")
		return len(v.Nodes) == 4 && v.Nodes[2].Phase == pullview.PhasePulling
	}, "decided from the reports")
	for n, it := range items {
		cur, _ := h.item(n, "warm")
		require.Same(t, it, cur, "%s: the same work, the same generation", n)
	}
	require.Zero(t, h.writes(), "the status did not change")
	require.False(t, h.holds("warm", "n3"), "no free slot")
	for _, e := range h.events() {
		require.NotContains(t, e, "PullImageFailed", "the old leader's results are not told again")
	}

	h.report("n2", "warm", succeeded, "", nil)
	h.eventually(func() bool { return h.holds("warm", "n3") }, "n3 gets the free slot")
	h.eventually(func() bool { return h.job("warm").Status.Succeeded == 2 }, "status moves on")
}

func TestControllerNeverJobFollowsNodes(t *testing.T) {
	job := testJob(5)
	job.Spec.CompletionPolicy.Type = v1alpha1.Never
	job.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}}
	h := start(t, true, nodesObjs("n0", "n1"), job)
	h.eventually(func() bool { return h.holds("warm", "n0", "n1") }, "dispatched")
	h.report("n0", "warm", succeeded, "", nil)
	h.report("n1", "warm", succeeded, "", nil)
	h.eventually(func() bool { return h.job("warm").Status.Succeeded == 2 }, "both pulled")

	_, err := h.kube.CoreV1().Nodes().Create(context.Background(), testNode("n2", map[string]string{"pool": "a"}), metav1.CreateOptions{})
	require.NoError(t, err)
	h.eventually(func() bool { return h.holds("warm", "n2") }, "a new node is warmed")
	n1 := testNode("n1", map[string]string{"pool": "b"})
	_, err = h.kube.CoreV1().Nodes().Update(context.Background(), n1, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.eventually(func() bool { return !h.holds("warm", "n1") }, "a node that stops matching loses its work")
	h.eventually(func() bool { return h.job("warm").Status.Desired == 2 }, "desired follows")
	require.Nil(t, h.job("warm").Status.CompletionTime)

	h.report("n2", "warm", succeeded, "", nil)
	h.eventually(func() bool { return h.job("warm").Status.Succeeded == 2 }, "n2 pulled")
	h.clock.Step(repullPeriod + repullJitter)
	h.eventually(func() bool {
		a, _ := h.item("n0", "warm")
		b, _ := h.item("n2", "warm")
		return a.GetPull().GetRound() == 1 && b.GetPull().GetRound() == 1
	}, "a day later, a new round")
}

func TestControllerPodSelector(t *testing.T) {
	job := testJob(5)
	job.Spec.PodSelector = &v1alpha1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	h := start(t, true, append(nodesObjs("n0", "n1", "n2"), pod), job)
	h.eventually(func() bool { return h.holds("warm", "n1") }, "the pod's node")
	require.Equal(t, []string{"n1"}, h.holders("warm", "n0", "n1", "n2"))

	pod2 := pod.DeepCopy()
	pod2.Name, pod2.Spec.NodeName = "web-1", "n2"
	_, err := h.kube.CoreV1().Pods("default").Create(context.Background(), pod2, metav1.CreateOptions{})
	require.NoError(t, err)
	h.eventually(func() bool { return h.holds("warm", "n2") }, "a new pod's node")
}

func TestControllerDeletedJob(t *testing.T) {
	h := start(t, true, nodesObjs("n0"), testJob(1))
	h.eventually(func() bool { return h.holds("warm", "n0") }, "dispatched")
	require.NoError(t, h.shoal.AppsV1alpha1().ImagePullJobs("default").Delete(context.Background(), "warm", metav1.DeleteOptions{}))
	h.eventually(func() bool { return !h.holds("warm", "n0") }, "a deleted job's work is removed")
	_, ok := h.c.Nodes("default", "warm")
	require.False(t, ok)
}

func TestControllerNodesMetric(t *testing.T) {
	h := start(t, true, nodesObjs("n0", "n1", "n2"), testJob(1))
	h.eventually(func() bool { return h.holds("warm", "n0") }, "dispatched")
	h.report("n0", "warm", running, "", nil)
	h.eventually(func() bool {
		n, err := testutil.GatherAndCount(h.reg, MetricNodes)
		return err == nil && n == len(phases) && gauge(t, h.reg, "pulling") == 1 && gauge(t, h.reg, "not_started") == 2
	}, "nodes by phase")
	h.setLeader(false)
	require.Zero(t, gauge(t, h.reg, "pulling"), "a standby counts nothing")
}

func gauge(t *testing.T, reg *prometheus.Registry, phase string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != MetricNodes {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == phase {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
