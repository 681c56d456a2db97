// Package work runs the agent's accepted work items. Each item is persisted
// in the agent's state dir before it starts, its progress is saved as it
// goes, and after a restart every unfinished item is resumed from there —
// with or without a coordinator. Handlers, one per work kind, do the actual
// work and must be idempotent: a resumed item calls its handler again with
// the progress it saved.
package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Handler does the work of one kind.
type Handler interface {
	// Run drives t.Item to completion: nil means succeeded, an error means
	// failed (its text becomes the report's message). When ctx ends (the item
	// was removed, replaced by a new spec, or the agent is stopping) Run must
	// return promptly; what it saved with t.Update is what a later Run
	// resumes from. Progress also carries over to a new spec of the same
	// kind (a new generation), so Run must check that it still applies.
	Run(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Run implements Handler.
func (f HandlerFunc) Run(ctx context.Context, t *Task) error { return f(ctx, t) }

// Runner holds the node's work items, runs them through their kind's
// handler, and keeps the latest report of each for the coordinator link.
type Runner struct {
	store    *state.Store
	handlers map[string]Handler
	log      klog.Logger
	now      func() time.Time

	mu       sync.Mutex
	ctx      context.Context // set by Run; items start only after it is set
	stopping bool            // set by Run when ctx ends; no new starts
	entries  map[string]*entry
	dirty    map[string]bool
	changed  chan struct{}
	ready    chan struct{}
	wg       sync.WaitGroup

	itemsDesc *prometheus.Desc
	// loaded counts, by kind, the items Run found in the state dir: the
	// work a restarted agent kept.
	loaded     map[string]int
	loadedDesc *prometheus.Desc
}

type entry struct {
	item     *nodeworkv1.WorkItem
	report   *nodeworkv1.WorkReport
	progress json.RawMessage
	cancel   context.CancelFunc
	done     chan struct{}
}

// New returns a runner that keeps items in store and runs them with the
// handler registered for their kind.
func New(store *state.Store, handlers map[string]Handler, log klog.Logger) *Runner {
	return &Runner{
		store:    store,
		handlers: handlers,
		log:      log.WithName("work"),
		now:      time.Now,
		entries:  map[string]*entry{},
		dirty:    map[string]bool{},
		changed:  make(chan struct{}, 1),
		ready:    make(chan struct{}),
		itemsDesc: prometheus.NewDesc("shoal_agent_work_items",
			"Work items the agent holds, by kind and phase.", []string{"kind", "phase"}, nil),
		loaded: map[string]int{},
		loadedDesc: prometheus.NewDesc("shoal_agent_work_items_loaded",
			"Work items this agent process found in its state dir when it started, by kind: what a restarted agent kept.", []string{"kind"}, nil),
	}
}

// Kinds lists the kinds the runner has handlers for.
func (r *Runner) Kinds() []string { return slices.Sorted(maps.Keys(r.handlers)) }

// Run loads the state dir, resumes unfinished items, and runs until ctx
// ends; then it stops every item (their progress stays saved) and returns.
func (r *Runner) Run(ctx context.Context) error {
	recs, err := r.store.List()
	if err != nil {
		return fmt.Errorf("load work from state dir: %w", err)
	}
	r.mu.Lock()
	r.ctx = ctx
	for _, rec := range recs {
		e, err := decodeRecord(rec)
		if err != nil {
			r.log.Error(err, "Dropping unreadable work record", "id", rec.ID)
			if err := r.store.Delete(rec.ID); err != nil {
				r.log.Error(err, "Delete unreadable work record", "id", rec.ID)
			}
			continue
		}
		r.entries[rec.ID] = e
		r.dirty[rec.ID] = true
		r.loaded[e.item.GetKind()]++
		switch {
		case !r.runnable(e.item):
			// A newer agent accepted it and this one was rolled back.
			if e.report.GetPhase() != nodeworkv1.Phase_PHASE_UNSUPPORTED {
				r.setUnsupported(e)
				r.persistLocked(rec.ID, e)
			}
		case e.report.GetPhase() == nodeworkv1.Phase_PHASE_UNSUPPORTED:
			// An older agent could not run it; this one can.
			e.report.Phase, e.report.Message = nodeworkv1.Phase_PHASE_PENDING, ""
			r.persistLocked(rec.ID, e)
			r.start(e)
		case !terminal(e.report.GetPhase()):
			r.log.Info("Resuming work from the state dir", "id", rec.ID, "kind", e.item.GetKind(), "generation", e.item.GetGeneration())
			r.start(e)
		}
	}
	r.signal()
	close(r.ready)
	r.mu.Unlock()

	<-ctx.Done()
	// start checks stopping under r.mu before wg.Add, so no handler can be
	// added behind Wait's back.
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// runnable reports whether this agent has a handler for the item's kind.
func (r *Runner) runnable(item *nodeworkv1.WorkItem) bool {
	return nodework.KindOf(item) != "" && r.handlers[item.GetKind()] != nil
}

// setUnsupported marks e as a kind this agent cannot run.
func (r *Runner) setUnsupported(e *entry) {
	e.report.Phase = nodeworkv1.Phase_PHASE_UNSUPPORTED
	e.report.Message = fmt.Sprintf("this agent cannot run work of kind %q (it runs %v); upgrade the agent", e.item.GetKind(), r.Kinds())
	r.log.Info("Unsupported work kind", "id", e.item.GetId(), "kind", e.item.GetKind())
}

// Ready is closed once Run has loaded the state dir.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

func decodeRecord(rec state.Record) (*entry, error) {
	e := &entry{item: &nodeworkv1.WorkItem{}, report: &nodeworkv1.WorkReport{}, progress: rec.Progress}
	if err := proto.Unmarshal(rec.Item, e.item); err != nil {
		return nil, fmt.Errorf("decode item: %w", err)
	}
	if err := proto.Unmarshal(rec.Report, e.report); err != nil {
		return nil, fmt.Errorf("decode report: %w", err)
	}
	if e.item.GetId() != rec.ID {
		return nil, fmt.Errorf("record %q holds item %q", rec.ID, e.item.GetId())
	}
	return e, nil
}

func terminal(p nodeworkv1.Phase) bool {
	return p == nodeworkv1.Phase_PHASE_SUCCEEDED || p == nodeworkv1.Phase_PHASE_FAILED || p == nodeworkv1.Phase_PHASE_UNSUPPORTED
}

// Sync makes the held set exactly items: new ones start, changed ones
// restart, missing ones stop and are forgotten.
func (r *Runner) Sync(items []*nodeworkv1.WorkItem) {
	<-r.ready
	want := map[string]bool{}
	for _, it := range items {
		want[it.GetId()] = true
		r.Upsert(it)
	}
	r.mu.Lock()
	var gone []string
	for id := range r.entries {
		if !want[id] {
			gone = append(gone, id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.Remove(id)
	}
}

// Upsert accepts a work item. The same spec at another generation only
// moves the generation on (no restart); a different spec restarts the work
// from scratch.
func (r *Runner) Upsert(item *nodeworkv1.WorkItem) {
	<-r.ready
	id := item.GetId()
	r.mu.Lock()
	old := r.entries[id]
	var oldPhase nodeworkv1.Phase
	if old != nil {
		oldPhase = old.report.GetPhase() // handlers replace reports under r.mu
	}
	r.mu.Unlock()
	retry := old != nil && oldPhase == nodeworkv1.Phase_PHASE_UNSUPPORTED && r.runnable(item)
	if old != nil && nodework.SameSpec(old.item, item) && !retry {
		r.mu.Lock()
		if old.item.GetGeneration() != item.GetGeneration() {
			old.item = item
			rep := proto.Clone(old.report).(*nodeworkv1.WorkReport)
			rep.ObservedGeneration = item.GetGeneration()
			old.report = rep
			r.persistLocked(id, old)
			r.markLocked(id)
		}
		r.mu.Unlock()
		return
	}
	var carried json.RawMessage
	if old != nil {
		r.stop(old) // returns once its Run did: its progress is final
		if old.item.GetKind() == item.GetKind() {
			r.mu.Lock()
			carried = old.progress
			r.mu.Unlock()
		}
	}
	e := &entry{item: item, progress: carried, report: &nodeworkv1.WorkReport{
		Id: id, ObservedGeneration: item.GetGeneration(), Kind: item.GetKind(),
		Phase: nodeworkv1.Phase_PHASE_PENDING, UpdatedUnixNanos: r.now().UnixNano(),
	}}
	known := r.runnable(item)
	if !known {
		r.setUnsupported(e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[id] = e
	r.persistLocked(id, e)
	r.markLocked(id)
	if known {
		r.start(e)
	}
}

// Remove stops an item and forgets it.
func (r *Runner) Remove(id string) {
	<-r.ready
	r.mu.Lock()
	e := r.entries[id]
	r.mu.Unlock()
	if e == nil {
		return
	}
	r.stop(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[id] == e {
		delete(r.entries, id)
		delete(r.dirty, id)
		if err := r.store.Delete(id); err != nil {
			r.log.Error(err, "Forget work item", "id", id)
		}
	}
}

// start runs e's handler in its own goroutine. Callers hold r.mu.
func (r *Runner) start(e *entry) {
	if r.ctx == nil || r.stopping || r.ctx.Err() != nil {
		return
	}
	item := e.item // Upsert may replace e.item (generation bump) under r.mu
	h := r.handlers[item.GetKind()]
	if h == nil {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	e.cancel, e.done = cancel, make(chan struct{})
	t := &Task{Item: item, runner: r, entry: e, ctx: ctx}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(e.done)
		log := r.log.WithValues("id", item.GetId(), "kind", item.GetKind(), "generation", item.GetGeneration())
		err := h.Run(klog.NewContext(ctx, log), t)
		if ctx.Err() != nil {
			return // stopped: removed, replaced or shutting down; progress is saved
		}
		if err != nil {
			log.Info("Work failed", "err", err.Error())
			t.finish(nodeworkv1.Phase_PHASE_FAILED, err.Error())
			return
		}
		log.V(2).Info("Work succeeded")
		t.finish(nodeworkv1.Phase_PHASE_SUCCEEDED, "")
	}()
}

// stop cancels e's handler and waits for it to return.
func (r *Runner) stop(e *entry) {
	r.mu.Lock()
	cancel, done := e.cancel, e.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// persistLocked writes e to the state dir. Callers hold r.mu.
func (r *Runner) persistLocked(id string, e *entry) {
	item, err := proto.Marshal(e.item)
	if err == nil {
		var rep []byte
		if rep, err = proto.Marshal(e.report); err == nil {
			err = r.store.Put(id, state.Record{
				ID: id, Generation: e.item.GetGeneration(), Kind: e.item.GetKind(),
				Item: item, Report: rep, Progress: e.progress, UpdatedAt: r.now(),
			})
		}
	}
	if err != nil {
		// The work goes on; only a restart would lose this step.
		r.log.Error(err, "Persist work item", "id", id)
	}
}

func (r *Runner) markLocked(id string) {
	r.dirty[id] = true
	r.signal()
}

func (r *Runner) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value (coalesced) whenever some report changed.
func (r *Runner) Changed() <-chan struct{} { return r.changed }

// TakeDirty returns the latest report of every item whose report changed
// since the last call, sorted by id, and clears the set.
func (r *Runner) TakeDirty() []*nodeworkv1.WorkReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*nodeworkv1.WorkReport, 0, len(r.dirty))
	for _, id := range slices.Sorted(maps.Keys(r.dirty)) {
		if e := r.entries[id]; e != nil {
			out = append(out, e.report)
		}
	}
	clear(r.dirty)
	return out
}

// MarkAllDirty queues every report to be sent again (after a reconnect the
// coordinator needs the full observed state).
func (r *Runner) MarkAllDirty() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.entries {
		r.dirty[id] = true
	}
	r.signal()
}

// Held lists the items held, for the Hello.
func (r *Runner) Held() []*nodeworkv1.WorkRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*nodeworkv1.WorkRef, 0, len(r.entries))
	for _, id := range slices.Sorted(maps.Keys(r.entries)) {
		e := r.entries[id]
		out = append(out, &nodeworkv1.WorkRef{Id: id, Generation: e.item.GetGeneration(), Phase: e.report.GetPhase()})
	}
	return out
}

// Report returns the latest report of one item.
func (r *Runner) Report(id string) (*nodeworkv1.WorkReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return nil, false
	}
	return e.report, true
}

// Describe implements prometheus.Collector.
func (r *Runner) Describe(ch chan<- *prometheus.Desc) { ch <- r.itemsDesc; ch <- r.loadedDesc }

// Collect implements prometheus.Collector.
func (r *Runner) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	counts := map[[2]string]int{}
	for _, e := range r.entries {
		counts[[2]string{e.item.GetKind(), e.report.GetPhase().String()}]++
	}
	loaded := maps.Clone(r.loaded)
	r.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(r.itemsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for kind, n := range loaded {
		ch <- prometheus.MustNewConstMetric(r.loadedDesc, prometheus.GaugeValue, float64(n), kind)
	}
}

// Task is one run of one work item, handed to its handler.
type Task struct {
	// Item is the work item (read-only).
	Item *nodeworkv1.WorkItem

	runner *Runner
	entry  *entry
	ctx    context.Context
}

// errStale is returned to a handler that writes after being stopped.
var errStale = errors.New("work item was stopped")

// LoadProgress decodes the saved progress into v and reports whether there
// was any.
func (t *Task) LoadProgress(v any) (bool, error) {
	t.runner.mu.Lock()
	raw := t.entry.progress
	t.runner.mu.Unlock()
	if len(raw) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode saved progress of %q: %w", t.Item.GetId(), err)
	}
	return true, nil
}

// Update saves progress (when v is not nil) and sets the report's phase,
// message and kind-specific status, all in one durable write, and queues the
// report for the coordinator. A message longer than a report may hold is
// cut (clip).
func (t *Task) Update(v any, phase nodeworkv1.Phase, message string, setStatus func(*nodeworkv1.WorkReport)) error {
	var raw json.RawMessage
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode progress of %q: %w", t.Item.GetId(), err)
		}
		raw = b
	}
	return t.set(raw, true, phase, message, setStatus)
}

// Report sets the report's phase, message and kind-specific status and
// queues the report for the coordinator, like Update, but writes nothing to
// the state dir. It is for frequent progress that is not worth a disk write
// each time (a pull's byte counts, say): the next Update saves it along
// with its own change, and after an agent restart the report is the one
// the last Update saved.
func (t *Task) Report(phase nodeworkv1.Phase, message string, setStatus func(*nodeworkv1.WorkReport)) error {
	return t.set(nil, false, phase, message, setStatus)
}

// set is Update (durable) and Report (not durable).
func (t *Task) set(raw json.RawMessage, durable bool, phase nodeworkv1.Phase, message string, setStatus func(*nodeworkv1.WorkReport)) error {
	r := t.runner
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.ctx.Err() != nil || r.entries[t.Item.GetId()] != t.entry {
		return errStale
	}
	if raw != nil {
		t.entry.progress = raw
	}
	rep := proto.Clone(t.entry.report).(*nodeworkv1.WorkReport)
	rep.Phase, rep.Message, rep.UpdatedUnixNanos = phase, clip(message), r.now().UnixNano()
	rep.ObservedGeneration = t.entry.item.GetGeneration()
	if setStatus != nil {
		setStatus(rep)
	}
	t.entry.report = rep
	if durable {
		r.persistLocked(t.Item.GetId(), t.entry)
	}
	r.markLocked(t.Item.GetId())
	return nil
}

func (t *Task) finish(phase nodeworkv1.Phase, message string) {
	if err := t.Update(nil, phase, message, nil); err != nil && !errors.Is(err, errStale) {
		t.runner.log.Error(err, "Record work result", "id", t.Item.GetId())
	}
}

// clip cuts s to what a report message may hold, on a rune boundary.
func clip(s string) string {
	const limit = nodework.MaxMessageTextBytes
	if len(s) <= limit {
		return s
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
