package imagepull

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Pacing of a job's syncs: a report that changes a node's phase syncs the
// job at most minSyncGap after its last sync (so a burst of reports from
// many nodes is one sync), a progress-only report at most progressGap
// after it.
const (
	minSyncGap  = 25 * time.Millisecond
	progressGap = time.Second
)

// maxFailureEvents is how many PullImageFailed Events a job gets one by
// one; one more says that further failures are only in the status.
const maxFailureEvents = 10

// workers is the number of jobs synced at once.
const workers = 4

// Options wire a Controller.
type Options struct {
	// Client reads the jobs' pull secrets (live GETs, never a watch).
	Client kubernetes.Interface
	// Shoal writes the jobs' status and deletes finished jobs after their
	// ttlSecondsAfterFinished.
	Shoal shoalclient.Interface
	// Jobs, Nodes and Pods are the shared informers of ImagePullJobs,
	// nodes and pods.
	Jobs, Nodes, Pods cache.SharedIndexInformer
	// Store holds the nodes' work.
	Store *dispatch.Store
	// Writer paces the status writes.
	Writer statuswriter.Enqueuer
	// IsLeader tells whether this replica may write to the API; a standby
	// keeps its work store the way the leader's is, and writes nothing.
	IsLeader func() bool
	// Recorder records Events on jobs; nil records none.
	Recorder events.EventRecorder
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Clock is the coordinator's clock; nil means the real one.
	Clock clock.WithTicker
}

// Controller drives ImagePullJobs: it gathers what decide needs, hands the
// work to the nodes, and writes status, Events, metrics and TTL
// deletions. It also serves the per-node view of each job.
type Controller struct {
	o       Options
	clock   clock.WithTicker
	queue   workqueue.TypedRateLimitingInterface[string]
	jobs    cache.Indexer
	nodes   cache.Indexer
	pods    cache.Indexer
	secrets *secretCache
	metrics *metrics

	// minSyncGap and progressGap pace report-driven syncs (tests set 0).
	minSyncGap, progressGap time.Duration

	mu     sync.Mutex
	states map[string]*jobState // by namespace/name
	// lastSync is when each existing job's last sync began.
	lastSync map[string]time.Time
	// leading, epoch and leadingSince follow this replica's leadership:
	// every time it starts leading the epoch moves on.
	leading      bool
	epoch        int
	leadingSince time.Time
	// nodeEpoch and podEpoch move on with every change of the nodes or
	// pods that can change a job's targets.
	nodeEpoch, podEpoch uint64

	synced                     atomic.Bool
	jobsReg, nodesReg, podsReg cache.ResourceEventHandlerRegistration
}

// jobState is what the controller keeps about one job. The job's sync
// (one at a time per job) owns it; mu guards what the view, the metrics
// and the status writer read.
type jobState struct {
	uid    types.UID
	seeded bool
	epoch  int
	specs  *specSet
	// candidates caches the job's targets, valid while the epochs and the
	// job's selectors are the ones it was computed with.
	candidates      []string
	candValid       bool
	candNodeEpoch   uint64
	candPodEpoch    uint64
	candSelector    *v1alpha1.ImagePullJobNodeSelector
	candPodSelector *v1alpha1.ImagePullJobPodSelector
	// Problems already reported by Events, so each is told once.
	warnedSecrets   map[string]string
	selectorProblem string
	specProblem     string
	failureEvents   int
	// seq numbers the applies; a node not marked by the last one is no
	// longer targeted.
	seq uint64
	// lastReport is the last reported phase per node (guarded by the
	// controller's mu): a report that only moves bytes does not hurry a
	// sync.
	lastReport map[string]reportMark

	mu     sync.Mutex
	status *v1alpha1.ImagePullJobStatus // this leader's latest decision
	// written is the last status this leader wrote, and writtenOver the
	// resourceVersion it wrote over: while the informer still shows that
	// version, writing the same status again would only conflict.
	written     *v1alpha1.ImagePullJobStatus
	writtenOver string
	order       []string // targeted nodes, sorted
	nodes       map[string]*nodeMem
	counts      [len(phases)]int
}

type reportMark struct {
	gen   int64
	phase nodeworkv1.Phase
}

// nodeMem is what the controller keeps about one node of a job.
type nodeMem struct {
	// Sync-only fields.
	holds     bool // the store holds the job's work for the node
	putAt     time.Time
	inherited bool
	mark      uint64
	// View fields (under jobState.mu).
	phase   string
	message string
	since   time.Time
	round   uint32
	report  *nodeworkv1.WorkReport
}

// New wires a controller to its informers. It needs no API server until
// Run: the benchmarks drive it over fake clientsets.
func New(o Options) (*Controller, error) {
	switch {
	case o.Jobs == nil || o.Nodes == nil || o.Pods == nil:
		return nil, fmt.Errorf("imagepull controller: the Jobs, Nodes and Pods informers are required")
	case o.Store == nil || o.Writer == nil || o.Shoal == nil || o.Client == nil:
		return nil, fmt.Errorf("imagepull controller: Client, Shoal, Store and Writer are required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.IsLeader == nil {
		o.IsLeader = func() bool { return true }
	}
	c := &Controller{
		o:           o,
		clock:       o.Clock,
		queue:       syncloop.NewQueue("imagepulljob", o.Clock),
		jobs:        o.Jobs.GetIndexer(),
		nodes:       o.Nodes.GetIndexer(),
		pods:        o.Pods.GetIndexer(),
		secrets:     newSecretCache(o.Client, o.Clock),
		minSyncGap:  minSyncGap,
		progressGap: progressGap,
		states:      map[string]*jobState{},
		lastSync:    map[string]time.Time{},
	}
	c.metrics = newMetrics(c)
	if err := c.metrics.register(o.Registerer); err != nil {
		return nil, err
	}
	o.Store.HandleReports(nodework.KindPull, c.onReport)
	var err error
	if c.jobsReg, err = o.Jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("watch ImagePullJobs: %w", err)
	}
	if c.nodesReg, err = o.Nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.nodesChanged(false) },
		UpdateFunc: c.nodeUpdated,
		DeleteFunc: func(any) { c.nodesChanged(false) },
	}); err != nil {
		return nil, fmt.Errorf("watch nodes for ImagePullJobs: %w", err)
	}
	if c.podsReg, err = o.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(obj any) { c.podChanged(nil, obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch pods for ImagePullJobs: %w", err)
	}
	return c, nil
}

// Idle reports whether the controller has no key waiting or being synced:
// once it has synced, the work store holds the node work of every object
// it has seen.
func (c *Controller) Idle() bool { return syncloop.Idle(c.queue) }

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers and every job they listed was synced once, so
// that the work store holds every job's work.
func (c *Controller) HasSynced() bool {
	if c.synced.Load() {
		return true
	}
	if !c.jobsReg.HasSynced() || !c.nodesReg.HasSynced() || !c.podsReg.HasSynced() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.jobs.ListKeys() {
		if _, ok := c.lastSync[key]; !ok {
			return false
		}
	}
	c.synced.Store(true)
	return true
}

// Resync queues every job again; the coordinator calls it when this
// replica starts leading, so that the jobs are decided by the new leader
// at once (timeouts of work handed out earlier count from now).
func (c *Controller) Resync() {
	c.observeLeader(c.o.IsLeader())
	for _, key := range c.jobs.ListKeys() {
		c.queue.Add(key)
	}
}

// observeLeader moves the leadership epoch on when this replica has begun
// leading.
func (c *Controller) observeLeader(leader bool) (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if leader && !c.leading {
		c.epoch++
		c.leadingSince = c.clock.Now()
	}
	c.leading = leader
	return c.epoch, c.leadingSince
}

// Run processes the queue with a few workers until ctx ends. Jobs are
// decided only once the informers have listed everything: a job decided
// over a partial node list would lose its work on the missing nodes.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.jobsReg.HasSynced, c.nodesReg.HasSynced, c.podsReg.HasSynced) {
		return nil
	}
	syncloop.Run(ctx, c.queue, workers, "ImagePullJob", c.sync)
	return nil
}

func (c *Controller) enqueue(obj any) { syncloop.Enqueue(c.queue, obj) }

// nodesChanged notes a change of the nodes and queues the jobs it may
// concern: every job, or with labelsOnly those that select nodes by label.
func (c *Controller) nodesChanged(labelsOnly bool) {
	c.mu.Lock()
	c.nodeEpoch++
	c.mu.Unlock()
	for _, obj := range c.jobs.List() {
		job, ok := obj.(*v1alpha1.ImagePullJob)
		if !ok || job.Status.CompletionTime != nil {
			continue
		}
		if labelsOnly && (job.Spec.PodSelector != nil || job.Spec.Selector == nil || len(job.Spec.Selector.Names) > 0) {
			continue
		}
		c.enqueue(job)
	}
}

func (c *Controller) nodeUpdated(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if ok1 && ok2 && apiequality.Semantic.DeepEqual(o.Labels, n.Labels) {
		return // status heartbeats and the like change no job's targets
	}
	c.nodesChanged(true)
}

// podChanged queues the jobs of the pod's namespace that select nodes by
// pods, when the change can move their targets.
func (c *Controller) podChanged(old, cur any) {
	if t, ok := cur.(cache.DeletedFinalStateUnknown); ok {
		cur = t.Obj
	}
	pod, ok := cur.(*corev1.Pod)
	if !ok {
		return
	}
	if o, ok := old.(*corev1.Pod); ok && podActiveOn(o) == podActiveOn(pod) && apiequality.Semantic.DeepEqual(o.Labels, pod.Labels) {
		return
	}
	jobs, err := c.jobs.ByIndex(cache.NamespaceIndex, pod.Namespace)
	if err != nil {
		return
	}
	bumped := false
	for _, obj := range jobs {
		job, ok := obj.(*v1alpha1.ImagePullJob)
		if !ok || job.Spec.PodSelector == nil || job.Status.CompletionTime != nil {
			continue
		}
		if !bumped {
			c.mu.Lock()
			c.podEpoch++
			c.mu.Unlock()
			bumped = true
		}
		c.enqueue(job)
	}
}

// podActiveOn is the node an active, scheduled pod runs on, else "".
func podActiveOn(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return ""
	}
	return p.Spec.NodeName
}

// onReport hurries the job's sync when a node's phase changed; progress
// alone waits for the next progressGap.
func (c *Controller) onReport(node string, item *nodeworkv1.WorkItem, r *nodeworkv1.WorkReport) {
	key, ok := strings.CutPrefix(r.GetId(), nodework.KindPull+"/")
	if !ok || strings.Count(key, "/") != 1 || item == nil {
		return
	}
	urgent := true
	mark := reportMark{gen: r.GetObservedGeneration(), phase: r.GetPhase()}
	c.mu.Lock()
	if st := c.states[key]; st != nil {
		if st.lastReport[node] == mark {
			urgent = false
		} else {
			st.lastReport[node] = mark
		}
	}
	last := c.lastSync[key]
	c.mu.Unlock()
	gap := c.minSyncGap
	if !urgent {
		gap = c.progressGap
	}
	c.queue.AddAfter(key, last.Add(gap).Sub(c.clock.Now()))
}

// stateFor returns the job's state, new for a new job (or a job recreated
// under the same name: the old one's work goes).
func (c *Controller) stateFor(key, id string, uid types.UID) *jobState {
	c.mu.Lock()
	st := c.states[key]
	if st != nil && st.uid == uid {
		c.mu.Unlock()
		return st
	}
	fresh := &jobState{uid: uid, nodes: map[string]*nodeMem{}, lastReport: map[string]reportMark{}, warnedSecrets: map[string]string{}}
	c.states[key] = fresh
	c.mu.Unlock()
	if st != nil {
		c.dropWork(st, id)
	}
	return fresh
}

// forget drops a deleted job's work and state.
func (c *Controller) forget(key, id string) {
	c.mu.Lock()
	st := c.states[key]
	delete(c.states, key)
	c.mu.Unlock()
	if st != nil {
		c.dropWork(st, id)
	}
}

// dropWork removes the job's work from every node.
func (c *Controller) dropWork(st *jobState, id string) {
	for node, m := range st.nodes {
		if m.holds {
			c.o.Store.Delete(node, id)
			m.holds = false
		}
	}
}

// sync brings one job's world in line with its plan and returns when to
// look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	now := c.clock.Now()
	c.mu.Lock()
	c.lastSync[key] = now
	c.mu.Unlock()
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	id := nodework.PullID(ns, name)
	obj, exists, err := c.jobs.GetByKey(key)
	if err != nil {
		return 0, fmt.Errorf("get ImagePullJob %s from the informer: %w", key, err)
	}
	if !exists {
		c.forget(key, id)
		c.mu.Lock()
		delete(c.lastSync, key)
		c.mu.Unlock()
		return 0, nil
	}
	job := obj.(*v1alpha1.ImagePullJob)
	if job.DeletionTimestamp != nil {
		c.forget(key, id)
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("imagePullJob", klog.KObj(job))
	st := c.stateFor(key, id, job.UID)
	leader := c.o.IsLeader()
	epoch, leadingSince := c.observeLeader(leader)
	if st.epoch != epoch {
		// This replica began leading: what it holds was handed out by the
		// leader before it, whose results the agents report again.
		st.epoch = epoch
		for _, m := range st.nodes {
			if m.holds {
				m.inherited, m.putAt = true, leadingSince
			}
		}
		st.mu.Lock()
		st.status = nil
		st.mu.Unlock()
	}

	base := job
	st.mu.Lock()
	decided := st.status
	st.mu.Unlock()
	if leader && decided != nil {
		cp := *job
		cp.Status = *decided
		base = &cp
	}
	if base.Status.CompletionTime != nil || job.Status.CompletionTime != nil {
		// Finished (by this leader's decision, or as the API says): no
		// work, and a finished job is never reopened.
		c.dropWork(st, id)
		st.mu.Lock()
		st.counts = [len(phases)]int{} // no work left to count
		st.mu.Unlock()
		if !leader {
			return 0, nil
		}
		if decided != nil && !apiequality.Semantic.DeepEqual(*decided, job.Status) {
			c.writeStatus(key)
		}
		if job.Status.CompletionTime == nil {
			return 0, nil // the completed status is on its way; its update syncs again
		}
		return c.finish(ctx, job, now)
	}

	targets, err := c.targets(st, job)
	if err != nil {
		targets = nil
		if problem := err.Error(); problem != st.selectorProblem && leader {
			st.selectorProblem = problem
			log.Error(err, "ImagePullJob selects no nodes")
			c.event(job, corev1.EventTypeWarning, "InvalidSelector", "Select", "Selects no nodes: %s", problem)
		}
	} else {
		st.selectorProblem = ""
	}
	auths, err := c.secrets.resolve(ctx, job)
	if err != nil {
		return 0, err
	}
	c.warnSecrets(st, job, auths, leader)
	specs, err := st.specsFor(job, auths.auths)
	if err != nil {
		if problem := err.Error(); problem != st.specProblem && leader {
			st.specProblem = problem
			log.Error(err, "ImagePullJob cannot be turned into node work")
			c.event(job, corev1.EventTypeWarning, "InvalidSpec", "Pull", "Cannot hand this job to nodes: %s", problem)
		}
	} else {
		st.specProblem = ""
	}

	holding := make(map[string]held, len(st.nodes))
	for node, m := range st.nodes {
		if !m.holds {
			continue
		}
		item, rep := c.o.Store.Item(node, id)
		if item.GetPull() == nil {
			m.holds = false
			continue
		}
		h := held{spec: item.GetPull(), putAt: m.putAt, inherited: m.inherited}
		if rep != nil && rep.GetObservedGeneration() == item.GetGeneration() {
			h.report = rep
		}
		holding[node] = h
	}
	p := decide(input{job: base, nodes: targets, held: holding, specs: specs, leader: leader, seeded: st.seeded,
		leadingSince: leadingSince, now: now})
	st.seeded = true
	changes := c.apply(st, id, targets, p, holding, leader, now)

	if leader {
		if p.writeStatus {
			st.mu.Lock()
			status := p.status
			st.status = &status
			st.mu.Unlock()
			if !apiequality.Semantic.DeepEqual(p.status, job.Status) {
				c.writeStatus(key)
			}
		}
		c.record(log, st, job, p, changes)
	}
	after := p.requeueAfter
	if len(job.Spec.PullSecrets) > 0 && p.status.CompletionTime == nil {
		after = minPositive(after, secretTTL) // pick up a changed secret
	}
	return after, nil
}

// change is a node's move into a finished phase, for Events and metrics.
type change struct {
	node    string
	phase   string
	message string
	report  *nodeworkv1.WorkReport
}

// apply makes the store hold exactly the plan's work and updates the
// per-node view. It returns the nodes that moved into a finished phase
// and whose results this leader is the first to see.
func (c *Controller) apply(st *jobState, id string, targets []string, p plan, holding map[string]held, leader bool, now time.Time) []change {
	// The plan covers the targets in order; the rest lose their work.
	st.seq++
	mark := st.seq
	var changes []change
	if p.nodes == nil && p.status.CompletionTime == nil {
		// No plan for the nodes (the job's work cannot be built): drop it.
		c.dropWork(st, id)
	}
	newNodes := map[string]*nodeMem{}
	for i := range p.nodes {
		r := &p.nodes[i]
		m := st.nodes[r.node]
		if m == nil {
			m = &nodeMem{phase: pullview.PhaseNotStarted, since: now}
			newNodes[r.node] = m
		}
		m.mark = mark
		if r.spec == nil {
			if m.holds {
				c.o.Store.Delete(r.node, id)
				m.holds = false
			}
		} else {
			h, had := holding[r.node]
			if r.put || !had || h.spec != r.spec {
				changed := c.o.Store.Put(r.node, &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindPull, Spec: &nodeworkv1.WorkItem_Pull{Pull: r.spec}})
				if changed || !had {
					m.putAt = time.Time{}
					if leader {
						m.putAt = now
					}
				}
			}
			m.holds = true
		}
		m.inherited = r.inherited || !leader
		if leader && r.phase != m.phase && terminalPhase(r.phase) && !r.inherited {
			changes = append(changes, change{node: r.node, phase: r.phase, message: r.message, report: r.report})
		}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	for n, m := range newNodes {
		st.nodes[n] = m
	}
	if p.nodes != nil {
		for node, m := range st.nodes {
			if m.mark != mark {
				if m.holds {
					c.o.Store.Delete(node, id)
				}
				delete(st.nodes, node)
			}
		}
		st.order = targets
	}
	st.counts = [len(phases)]int{}
	for i := range p.nodes {
		r := &p.nodes[i]
		m := st.nodes[r.node]
		if m.phase != r.phase {
			m.phase, m.since = r.phase, now
		}
		m.message, m.round, m.report = r.message, r.round, r.report
		st.counts[phaseIndex(r.phase)]++
	}
	return changes
}

// specsFor is the job's work for its current spec and credentials,
// reusing the previous specs (and so their pointers) when nothing changed.
func (st *jobState) specsFor(job *v1alpha1.ImagePullJob, auths []*nodeworkv1.RegistryAuth) (*specSet, error) {
	t, err := pullTemplate(job, auths)
	if err != nil {
		return nil, err
	}
	if st.specs != nil && proto.Equal(st.specs.template, t) {
		return st.specs, nil
	}
	st.specs = newSpecSet(t)
	return st.specs, nil
}

// targets are the job's nodes, from cache while nothing they depend on
// changed.
func (c *Controller) targets(st *jobState, job *v1alpha1.ImagePullJob) ([]string, error) {
	c.mu.Lock()
	nodeEpoch, podEpoch := c.nodeEpoch, c.podEpoch
	c.mu.Unlock()
	if st.candValid && st.candNodeEpoch == nodeEpoch && (job.Spec.PodSelector == nil || st.candPodEpoch == podEpoch) &&
		apiequality.Semantic.DeepEqual(st.candSelector, job.Spec.Selector) &&
		apiequality.Semantic.DeepEqual(st.candPodSelector, job.Spec.PodSelector) {
		return st.candidates, nil
	}
	var nodes []*corev1.Node
	for _, obj := range c.nodes.List() {
		if n, ok := obj.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	var pods []*corev1.Pod
	if job.Spec.PodSelector != nil {
		objs, err := c.pods.ByIndex(cache.NamespaceIndex, job.Namespace)
		if err != nil {
			objs = c.pods.List()
		}
		for _, obj := range objs {
			if p, ok := obj.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
	}
	out, err := selectNodes(job, nodes, pods)
	st.candidates, st.candValid = out, err == nil
	st.candNodeEpoch, st.candPodEpoch = nodeEpoch, podEpoch
	st.candSelector, st.candPodSelector = job.Spec.Selector.DeepCopy(), job.Spec.PodSelector.DeepCopy()
	return out, err
}

// warnSecrets records an Event for each pull secret that is missing or
// unusable, once per problem.
func (c *Controller) warnSecrets(st *jobState, job *v1alpha1.ImagePullJob, a jobAuths, leader bool) {
	if !leader || (len(a.missing) == 0 && len(a.invalid) == 0 && len(st.warnedSecrets) == 0) {
		return
	}
	now := map[string]string{}
	for _, name := range a.missing {
		now[name] = "missing"
		if st.warnedSecrets[name] == "missing" {
			continue
		}
		c.event(job, corev1.EventTypeWarning, "SecretNotFound", "Pull",
			"Pull secret %s/%s does not exist; pulling without it. Create it in namespace %s (type %s): the job picks it up within about %s",
			job.Namespace, name, job.Namespace, corev1.SecretTypeDockerConfigJson, secretTTL)
	}
	for name, problem := range a.invalid {
		now[name] = problem
		if st.warnedSecrets[name] == problem {
			continue
		}
		c.event(job, corev1.EventTypeWarning, "SecretInvalid", "Pull",
			"Pull secret %s/%s cannot be used (%s); pulling without it. Fix the secret: the job picks it up within about %s",
			job.Namespace, name, problem, secretTTL)
	}
	st.warnedSecrets = now
}

// record emits the Events and metrics of what the plan changed.
func (c *Controller) record(log klog.Logger, st *jobState, job *v1alpha1.ImagePullJob, p plan, changes []change) {
	if p.started {
		log.V(2).Info("ImagePullJob started", "nodes", p.status.Desired, "parallelism", parallelism(job))
		c.event(job, corev1.EventTypeNormal, "Started", "Pull", "Pulling %s on %d nodes, at most %d at a time",
			job.Spec.Image, p.status.Desired, parallelism(job))
	}
	for _, ch := range changes {
		switch ch.phase {
		case pullview.PhaseSucceeded:
			pull := ch.report.GetPull()
			if pull != nil && !pull.GetPresent() && pull.GetPullMillis() > 0 {
				c.metrics.pullSeconds.Observe(float64(pull.GetPullMillis()) / 1000)
			}
			if pull != nil && !pull.GetPresent() && !pull.GetShared() {
				c.metrics.bytes.Add(float64(pull.GetBytesDone()))
			}
		case pullview.PhaseFailed:
			if p.finished == resultDeadline && ch.message == msgDeadline {
				continue // told once by DeadlineExceeded
			}
			c.failureEvent(log, st, job, ch)
		}
	}
	if p.finished == "" {
		return
	}
	c.metrics.completed.WithLabelValues(p.finished).Inc()
	s := p.status
	log.Info("ImagePullJob completed", "result", p.finished, "succeeded", s.Succeeded, "failed", s.Failed)
	if p.finished == resultDeadline {
		c.event(job, corev1.EventTypeWarning, "DeadlineExceeded", "Pull",
			"Job exceeds activeDeadlineSeconds (%ds): pulled on %d nodes, failed on %d",
			*job.Spec.CompletionPolicy.ActiveDeadlineSeconds, s.Succeeded, s.Failed)
		return
	}
	c.event(job, corev1.EventTypeNormal, "Completed", "Pull", "pulled on %d nodes, failed on %d", s.Succeeded, s.Failed)
}

// failureEvent tells of one failed node, the first maxFailureEvents one
// by one, then once that more are only in the status.
func (c *Controller) failureEvent(log klog.Logger, st *jobState, job *v1alpha1.ImagePullJob, ch change) {
	log.V(2).Info("Pull failed on node", "node", ch.node, "message", ch.message)
	st.failureEvents++
	switch {
	case st.failureEvents <= maxFailureEvents:
		c.event(job, corev1.EventTypeWarning, "PullImageFailed", "Pull", "Failed to pull %s on node %s: %s", job.Spec.Image, ch.node, ch.message)
	case st.failureEvents == maxFailureEvents+1:
		c.event(job, corev1.EventTypeWarning, "PullImageFailed", "Pull",
			"More than %d nodes failed to pull %s; further failures are not told one by one: see status.failedNodes, or `kubectl kruise get imagepulljob %s --nodes` for every node",
			maxFailureEvents, job.Spec.Image, job.Name)
	}
}

func (c *Controller) event(job *v1alpha1.ImagePullJob, typ, reason, action, note string, args ...any) {
	if c.o.Recorder == nil {
		return
	}
	c.o.Recorder.Eventf(job, nil, typ, reason, action, note, args...)
}

// writeStatus queues a write of the job's status. The write takes this
// leader's latest decision when it runs, so a later decision replaces an
// earlier one still waiting, and skips it when the API has it already.
func (c *Controller) writeStatus(key string) {
	c.o.Writer.Enqueue("imagepulljob/"+key, func(ctx context.Context) error {
		if !c.o.IsLeader() {
			return nil
		}
		c.mu.Lock()
		st := c.states[key]
		c.mu.Unlock()
		if st == nil {
			return nil
		}
		obj, ok, err := c.jobs.GetByKey(key)
		if err != nil {
			return fmt.Errorf("get ImagePullJob %s from the informer: %w", key, err)
		}
		if !ok {
			return nil
		}
		job := obj.(*v1alpha1.ImagePullJob)
		st.mu.Lock()
		var status *v1alpha1.ImagePullJobStatus
		if st.status != nil {
			status = st.status.DeepCopy()
		}
		pending := st.written != nil && st.writtenOver == job.ResourceVersion && apiequality.Semantic.DeepEqual(st.written, status)
		st.mu.Unlock()
		if status == nil || pending || job.UID != st.uid || apiequality.Semantic.DeepEqual(job.Status, *status) {
			return nil
		}
		if job.Status.CompletionTime != nil && status.CompletionTime == nil {
			return nil // never reopen a finished job
		}
		cp := job.DeepCopy()
		cp.Status = *status
		_, err = c.o.Shoal.AppsV1alpha1().ImagePullJobs(cp.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("write status of ImagePullJob %s: %w", key, err)
		}
		st.mu.Lock()
		st.written, st.writtenOver = status, job.ResourceVersion
		st.mu.Unlock()
		return nil
	})
}

// finish handles a job whose completed status is in the API: it deletes
// the job once its ttlSecondsAfterFinished is over.
func (c *Controller) finish(ctx context.Context, job *v1alpha1.ImagePullJob, now time.Time) (time.Duration, error) {
	ttl := job.Spec.CompletionPolicy.TTLSecondsAfterFinished
	if ttl == nil || job.Status.CompletionTime == nil {
		return 0, nil
	}
	if left := job.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(now); left > 0 {
		return left, nil
	}
	uid := job.UID
	err := c.o.Shoal.AppsV1alpha1().ImagePullJobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete ImagePullJob %s/%s after its TTL: %w", job.Namespace, job.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted ImagePullJob after its TTL", "imagePullJob", klog.KObj(job))
	return 0, nil
}

// phaseCounts sums the jobs' nodes by phase.
func (c *Controller) phaseCounts() [len(phases)]int {
	c.mu.Lock()
	states := make([]*jobState, 0, len(c.states))
	for _, st := range c.states {
		states = append(states, st)
	}
	c.mu.Unlock()
	var out [len(phases)]int
	for _, st := range states {
		st.mu.Lock()
		for i, n := range st.counts {
			out[i] += n
		}
		st.mu.Unlock()
	}
	return out
}
