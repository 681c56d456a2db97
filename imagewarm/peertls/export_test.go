package peertls

import "time"

// SetBackoff sets the retry delays of id's Run and takes their jitter out,
// so that a test knows how far to step its clock.
func SetBackoff(id *Identity, base, maxDelay time.Duration) {
	id.backoffBase, id.backoffMax = base, maxDelay
	id.jitter = func(d time.Duration) time.Duration { return d }
}
