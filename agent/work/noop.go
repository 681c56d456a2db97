package work

import (
	"context"
	"time"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Noop runs the test-only noop kind: it walks through spec.steps steps of
// spec.stepMillis each, saving progress after every step, and counts how
// often it was started. Restart and resume tests read steps_done and
// starts: an agent restart mid-way must resume (starts+1, steps_done kept),
// never start over.
type Noop struct{}

type noopProgress struct {
	StepsDone uint32 `json:"stepsDone"`
	Starts    uint32 `json:"starts"`
}

// Run implements Handler.
func (Noop) Run(ctx context.Context, t *Task) error {
	spec := t.Item.GetNoop()
	var p noopProgress
	if _, err := t.LoadProgress(&p); err != nil {
		return err
	}
	p.Starts++
	status := func(r *nodeworkv1.WorkReport) {
		r.Status = &nodeworkv1.WorkReport_Noop{Noop: &nodeworkv1.NoopStatus{StepsDone: p.StepsDone, Starts: p.Starts}}
	}
	if err := t.Update(&p, nodeworkv1.Phase_PHASE_RUNNING, "", status); err != nil {
		return err
	}
	step := time.Duration(spec.GetStepMillis()) * time.Millisecond
	for p.StepsDone < spec.GetSteps() {
		timer := time.NewTimer(step)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		p.StepsDone++
		if err := t.Update(&p, nodeworkv1.Phase_PHASE_RUNNING, "", status); err != nil {
			return err
		}
	}
	return nil
}
