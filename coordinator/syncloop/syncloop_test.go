package syncloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func newQueue() Queue {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

func TestRunSyncsRetriesAndRequeues(t *testing.T) {
	q := newQueue()
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	handle := func(_ context.Context, key string) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		switch {
		case key == "ns/fails" && calls[key] < 3:
			return 0, errors.New("not yet")
		case key == "ns/later" && calls[key] < 2:
			return time.Millisecond, nil
		}
		if calls["ns/fails"] == 3 && calls["ns/later"] == 2 && calls["ns/once"] == 1 {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return 0, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { Run(ctx, q, 2, "Thing", handle); close(stopped) }()

	for _, name := range []string{"once", "fails", "later"} {
		Enqueue(q, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}})
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("keys not synced within 10s")
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
	require.True(t, q.ShuttingDown())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"ns/once": 1, "ns/fails": 3, "ns/later": 2}, calls)
}

func TestEnqueueTombstone(t *testing.T) {
	q := newQueue()
	defer q.ShutDown()
	Enqueue(q, cache.DeletedFinalStateUnknown{Key: "ns/gone"})
	Enqueue(q, "not an object")
	require.Equal(t, 1, q.Len())
	key, _ := q.Get()
	require.Equal(t, "ns/gone", key)
}

// TestIdle: a queue is idle only when no key waits and none is being
// synced; a key put back with a delay or a retry's backoff does not count.
func TestIdle(t *testing.T) {
	q := NewQueue("idle-test", nil)
	defer q.ShutDown()
	require.True(t, Idle(q), "a new queue")

	q.Add("ns/a")
	require.False(t, Idle(q), "a key waits")
	key, quit := q.Get()
	require.False(t, quit)
	require.False(t, Idle(q), "a key is being synced")
	q.AddAfter(key, time.Hour)
	q.Done(key)
	require.True(t, Idle(q), "the key waits for its delay only")

	other := NewQueue("idle-test-other", nil)
	defer other.ShutDown()
	other.Add("ns/b")
	require.False(t, Idle(q, other), "one of two queues has a key")

	ctx := t.Context()
	go Run(ctx, other, 1, "test", func(context.Context, string) (time.Duration, error) { return 0, nil })
	require.NoError(t, WaitIdle(ctx, time.Millisecond, time.Minute, func() bool { return Idle(q, other) }))

	err := WaitIdle(ctx, time.Millisecond, 0, func() bool { return false })
	require.ErrorContains(t, err, "not idle within")
}
