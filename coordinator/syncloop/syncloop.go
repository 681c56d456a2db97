// Package syncloop is the worker loop every coordinator controller runs:
// keys come off a rate-limited work queue, a sync function handles each,
// and its answer decides whether the key comes back (after an error, with
// backoff; after a delay the sync asked for) or is done.
package syncloop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Queue is a controller's work queue of namespace/name keys.
type Queue = workqueue.TypedRateLimitingInterface[string]

// NewQueue returns a controller's work queue named name (the name of its
// metrics) with client-go's default controller rate limiter; clk drives
// its delays, nil meaning the real clock. The queue counts the keys being
// synced, for Idle.
func NewQueue(name string, clk clock.WithTicker) Queue {
	return &trackedQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk})}
}

// trackedQueue is a work queue that knows how many keys are out between
// Get and Done.
type trackedQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	out atomic.Int64
}

func (q *trackedQueue) Get() (string, bool) {
	key, quit := q.TypedRateLimitingInterface.Get()
	if !quit {
		q.out.Add(1)
	}
	return key, quit
}

func (q *trackedQueue) Done(key string) {
	q.out.Add(-1)
	q.TypedRateLimitingInterface.Done(key)
}

// Idle reports whether no key of the queues (made by NewQueue) waits or is
// being synced. Keys waiting for a delay or a retry's backoff do not count:
// they were synced at least once. Once the informers feeding the queues
// have synced, the first Idle means every object of their initial lists
// has been handled.
func Idle(queues ...Queue) bool {
	for _, q := range queues {
		if q.Len() > 0 {
			return false
		}
		if t, ok := q.(*trackedQueue); ok && t.out.Load() > 0 {
			return false
		}
	}
	return true
}

// WaitIdle polls idle every interval until it is true, ctx ends or timeout
// passes; the error says which.
func WaitIdle(ctx context.Context, interval, timeout time.Duration, idle func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return idle(), nil })
	if err != nil {
		return fmt.Errorf("work queues not idle within %v: %w", timeout, err)
	}
	return nil
}

// SyncFunc handles one key. A positive after asks for the key again that
// much later; an error retries it with the queue's backoff.
type SyncFunc func(ctx context.Context, key string) (after time.Duration, err error)

// Run syncs keys from q with workers goroutines until ctx ends, then shuts
// q down and waits for the syncs in flight; handle does the syncing. what names the objects in
// error logs, e.g. "ImagePullJob".
func Run(ctx context.Context, q Queue, workers int, what string, handle SyncFunc) {
	defer q.ShutDown()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for next(ctx, q, what, handle) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// next syncs one key; false once the queue has shut down.
func next(ctx context.Context, q Queue, what string, handle SyncFunc) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	after, err := handle(ctx, key)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync "+what, "key", key)
		q.AddRateLimited(key)
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
	return true
}

// Enqueue queues obj's namespace/name key on q (also for a deleted
// object's tombstone); it is what the controllers' informer handlers call.
func Enqueue(q Queue, obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		q.Add(key)
	}
}
