package probes

import (
	"time"

	"github.com/shoal-io/shoal/cri"
)

// NewCRIRuntimeWithClock is CRIRuntime reading the time from clock.
func NewCRIRuntimeWithClock(get func() (*cri.Runtime, error), events *cri.Events, clock func() time.Time) Runtime {
	return newCRIRuntime(get, events, clock)
}

// RunningMaxAge is how old a running list CRIRuntime trusts may be.
const RunningMaxAge = runningMaxAge
