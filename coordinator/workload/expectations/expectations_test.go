package expectations

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	e := New(clk, time.Minute)
	const cs = "ns/web"

	ok, waiting := e.Satisfied(cs)
	require.True(t, ok)
	require.Empty(t, waiting)

	e.Expect(cs, Create, "web-a")
	e.Expect(cs, Create, "web-b")
	e.Expect(cs, Delete, "web-old")
	ok, waiting = e.Satisfied(cs)
	require.False(t, ok, "a stale cache must not scale again")
	require.Equal(t, []string{"create web-a", "create web-b", "delete web-old"}, waiting)

	e.Observe(cs, Create, "web-a")
	e.Observe(cs, Delete, "web-old")
	e.Observe(cs, Create, "never-expected") // a no-op
	ok, waiting = e.Satisfied(cs)
	require.False(t, ok)
	require.Equal(t, []string{"create web-b"}, waiting)

	e.Observe(cs, Create, "web-b")
	ok, _ = e.Satisfied(cs)
	require.True(t, ok)

	t.Run("an unmet expectation expires", func(t *testing.T) {
		require.Zero(t, e.NextExpiry(cs), "nothing pending")
		e.Expect(cs, Create, "lost")
		require.InDelta(t, time.Minute.Seconds(), e.NextExpiry(cs).Seconds(), 0.2, "look again when it expires")
		clk.SetTime(clk.Now().Add(59 * time.Second))
		ok, _ := e.Satisfied(cs)
		require.False(t, ok)
		clk.SetTime(clk.Now().Add(time.Second))
		ok, waiting := e.Satisfied(cs)
		require.True(t, ok, "expired after the timeout: %v", waiting)
	})
	t.Run("workloads are independent; Forget drops one", func(t *testing.T) {
		e.Expect("ns/other", Create, "other-a")
		ok, _ := e.Satisfied(cs)
		require.True(t, ok, "another workload's expectation does not hold this one")
		ok, waiting := e.Satisfied("ns/other")
		require.False(t, ok)
		require.Equal(t, []string{"create other-a"}, waiting)
		e.Forget("ns/other")
		ok, _ = e.Satisfied("ns/other")
		require.True(t, ok)
	})
}

func TestExpectationsConcurrent(t *testing.T) {
	e := New(nil, 0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := string(rune('a' + i))
			e.Expect("ns/web", Create, pod)
			e.Observe("ns/web", Create, pod)
		}()
	}
	wg.Wait()
	ok, waiting := e.Satisfied("ns/web")
	require.True(t, ok, "%v", waiting)
}
