package work

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

func noopItem(id string, steps uint32) *nodeworkv1.WorkItem {
	return &nodeworkv1.WorkItem{Id: id, Generation: 1, Kind: nodework.KindNoop, Spec: &nodeworkv1.WorkItem_Noop{Noop: &nodeworkv1.NoopSpec{Steps: steps}}}
}

// seed writes a record as an earlier agent version would have left it.
func seed(t *testing.T, dir string, item *nodeworkv1.WorkItem, phase nodeworkv1.Phase) {
	t.Helper()
	st, err := state.Open(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	ib, err := proto.Marshal(item)
	require.NoError(t, err)
	rb, err := proto.Marshal(&nodeworkv1.WorkReport{Id: item.GetId(), ObservedGeneration: 1, Kind: item.GetKind(), Phase: phase})
	require.NoError(t, err)
	require.NoError(t, st.Put(item.GetId(), state.Record{ID: item.GetId(), Generation: 1, Kind: item.GetKind(), Item: ib, Report: rb}))
}

// start runs a runner over dir until the test ends.
func start(t *testing.T, dir string, handlers map[string]Handler) *Runner {
	t.Helper()
	r, _ := startStoppable(t, dir, handlers)
	return r
}

// startStoppable runs a runner over dir with handlers until stop is
// called (or the test ends).
func startStoppable(t *testing.T, dir string, handlers map[string]Handler) (*Runner, func()) {
	t.Helper()
	st, err := state.Open(dir)
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	r := New(st, handlers, ktesting.NewLogger(t, ktesting.NewConfig()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait(); require.NoError(t, st.Close()) }) }
	t.Cleanup(stop)
	<-r.Ready()
	return r, stop
}

func waitPhase(t *testing.T, r *Runner, id string, want nodeworkv1.Phase) *nodeworkv1.WorkReport {
	t.Helper()
	var rep *nodeworkv1.WorkReport
	require.Eventually(t, func() bool {
		rep, _ = r.Report(id)
		return rep.GetPhase() == want
	}, 10*time.Second, 5*time.Millisecond, "phase of %s: %v", id, rep)
	return rep
}

func TestRolledBackAgentMarksUnknownHeldWorkUnsupported(t *testing.T) {
	dir := t.TempDir()
	// A newer agent accepted a kind this build has no handler for.
	seed(t, dir, &nodeworkv1.WorkItem{Id: "future", Generation: 1, Kind: "teleport"}, nodeworkv1.Phase_PHASE_RUNNING)
	r := start(t, dir, map[string]Handler{nodework.KindNoop: Noop{}})
	rep := waitPhase(t, r, "future", nodeworkv1.Phase_PHASE_UNSUPPORTED)
	require.Contains(t, rep.GetMessage(), `"teleport"`)
}

func TestUpgradedAgentRunsWorkItOnceCouldNot(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, noopItem("n", 2), nodeworkv1.Phase_PHASE_UNSUPPORTED)
	r := start(t, dir, map[string]Handler{nodework.KindNoop: Noop{}})
	rep := waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.EqualValues(t, 2, rep.GetNoop().GetStepsDone())
}

func TestUpsertRetriesUnsupportedOnceRunnable(t *testing.T) {
	dir := t.TempDir()
	r := start(t, dir, map[string]Handler{})
	r.Upsert(noopItem("n", 1))
	waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_UNSUPPORTED)
	r.handlers[nodework.KindNoop] = Noop{} // as after an upgrade
	r.Upsert(noopItem("n", 1))
	waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
}

func TestSameSpecNewGenerationDoesNotRestart(t *testing.T) {
	r := start(t, t.TempDir(), map[string]Handler{nodework.KindNoop: Noop{}})
	r.Upsert(noopItem("n", 1))
	waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
	again := noopItem("n", 1)
	again.Generation = 7
	r.Upsert(again)
	rep, _ := r.Report("n")
	require.EqualValues(t, 7, rep.GetObservedGeneration())
	require.Equal(t, nodeworkv1.Phase_PHASE_SUCCEEDED, rep.GetPhase())
	require.EqualValues(t, 1, rep.GetNoop().GetStarts())
}

// A new spec of the same kind restarts the item with the progress it had
// saved; the noop item counts the restart as one more start, not a fresh
// first one.
func TestNewSpecOfSameKindKeepsProgress(t *testing.T) {
	r := start(t, t.TempDir(), map[string]Handler{nodework.KindNoop: Noop{}})
	r.Upsert(noopItem("n", 3))
	rep := waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.EqualValues(t, 1, rep.GetNoop().GetStarts())

	more := noopItem("n", 5)
	more.Generation = 2
	r.Upsert(more)
	rep = waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.EqualValues(t, 2, rep.GetObservedGeneration())
	require.EqualValues(t, 5, rep.GetNoop().GetStepsDone())
	require.EqualValues(t, 2, rep.GetNoop().GetStarts(), "resumed with the saved progress")

	// Another kind under the same id starts from nothing.
	r.handlers[nodework.KindRecreate] = HandlerFunc(func(_ context.Context, t *Task) error {
		var p noopProgress
		if ok, err := t.LoadProgress(&p); err != nil || ok {
			return fmt.Errorf("progress of another kind carried over (found %v, err %v)", ok, err)
		}
		return nil
	})
	r.Upsert(&nodeworkv1.WorkItem{Id: "n", Generation: 3, Kind: nodework.KindRecreate, Spec: &nodeworkv1.WorkItem_Recreate{Recreate: &nodeworkv1.RecreateSpec{PodUid: "u"}}})
	waitPhase(t, r, "n", nodeworkv1.Phase_PHASE_SUCCEEDED)
}

func TestTaskReportIsNotDurable(t *testing.T) {
	reported, proceed := make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, t *Task) error {
		if err := t.Report(nodeworkv1.Phase_PHASE_RUNNING, "half way", func(rep *nodeworkv1.WorkReport) {
			rep.Status = &nodeworkv1.WorkReport_Noop{Noop: &nodeworkv1.NoopStatus{StepsDone: 5}}
		}); err != nil {
			return err
		}
		close(reported)
		select {
		case <-proceed:
		case <-ctx.Done():
			return ctx.Err()
		}
		return t.Update(map[string]int{"step": 6}, nodeworkv1.Phase_PHASE_RUNNING, "saved", nil)
	})
	dir := t.TempDir()
	r := start(t, dir, map[string]Handler{nodework.KindNoop: h})
	_ = r.TakeDirty()
	r.Upsert(noopItem("a", 10))
	<-reported

	saved := func() *nodeworkv1.WorkReport {
		t.Helper()
		rec, err := r.store.Get("a")
		require.NoError(t, err)
		rep := &nodeworkv1.WorkReport{}
		require.NoError(t, proto.Unmarshal(rec.Report, rep))
		return rep
	}
	for _, tc := range []struct {
		name  string
		check func(t *testing.T)
	}{
		{"the runner's report has it", func(t *testing.T) {
			rep, _ := r.Report("a")
			require.Equal(t, nodeworkv1.Phase_PHASE_RUNNING, rep.GetPhase())
			require.Equal(t, "half way", rep.GetMessage())
			require.Equal(t, uint32(5), rep.GetNoop().GetStepsDone())
		}},
		{"it is queued for the coordinator", func(t *testing.T) {
			dirty := r.TakeDirty()
			require.Len(t, dirty, 1)
			require.Equal(t, "half way", dirty[0].GetMessage())
		}},
		{"the state dir does not", func(t *testing.T) {
			rep := saved()
			require.Equal(t, nodeworkv1.Phase_PHASE_PENDING, rep.GetPhase())
			require.Empty(t, rep.GetMessage())
		}},
	} {
		t.Run(tc.name, tc.check)
	}
	close(proceed)
	waitPhase(t, r, "a", nodeworkv1.Phase_PHASE_SUCCEEDED)
	rep := saved()
	require.Equal(t, nodeworkv1.Phase_PHASE_SUCCEEDED, rep.GetPhase())
	require.Equal(t, uint32(5), rep.GetNoop().GetStepsDone(), "the next durable write saves what Report set")
}

// Every report's message fits the protocol's limit, whether a handler set
// it or the runner took it from the error Run returned.
func TestReportMessagesAreClipped(t *testing.T) {
	long := strings.Repeat("é", nodework.MaxMessageTextBytes)
	for _, tc := range []struct {
		name string
		h    HandlerFunc
		want nodeworkv1.Phase
	}{
		{"set by the handler", func(ctx context.Context, t *Task) error {
			if err := t.Update(nil, nodeworkv1.Phase_PHASE_RUNNING, long, nil); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}, nodeworkv1.Phase_PHASE_RUNNING},
		{"the error of Run", func(context.Context, *Task) error { return errors.New(long) }, nodeworkv1.Phase_PHASE_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, t.TempDir(), map[string]Handler{nodework.KindNoop: tc.h})
			r.Upsert(noopItem("a", 1))
			rep := waitPhase(t, r, "a", tc.want)
			require.LessOrEqual(t, len(rep.GetMessage()), nodework.MaxMessageTextBytes)
			require.True(t, utf8.ValidString(rep.GetMessage()), "cut on a rune boundary")
			require.True(t, strings.HasSuffix(rep.GetMessage(), "..."))
		})
	}
}

func TestLoadedItemsAreCounted(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, noopItem("a", 1), nodeworkv1.Phase_PHASE_RUNNING)
	seed(t, dir, noopItem("b", 1), nodeworkv1.Phase_PHASE_SUCCEEDED)
	r := start(t, dir, map[string]Handler{nodework.KindNoop: Noop{}})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(r))
	got, err := testutil.GatherAndCount(reg, "shoal_agent_work_items_loaded")
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shoal_agent_work_items_loaded Work items this agent process found in its state dir when it started, by kind: what a restarted agent kept.
# TYPE shoal_agent_work_items_loaded gauge
shoal_agent_work_items_loaded{kind="noop"} 2
`), "shoal_agent_work_items_loaded"))

	// An empty state dir (a new agent, or one that lost it) loads none.
	empty := start(t, t.TempDir(), map[string]Handler{nodework.KindNoop: Noop{}})
	reg = prometheus.NewRegistry()
	require.NoError(t, reg.Register(empty))
	got, err = testutil.GatherAndCount(reg, "shoal_agent_work_items_loaded")
	require.NoError(t, err)
	require.Zero(t, got)
}
