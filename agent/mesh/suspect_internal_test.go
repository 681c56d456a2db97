package mesh

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

func TestSuspicionAndRetention(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	m, err := New(Config{NodeName: "a", Tuning: TuningLocal}, logger)
	require.NoError(t, err)
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m.clk = clk
	d := delegate{m: m}
	w := logWriter{m: m}
	node := func(name string, meta []byte) *memberlist.Node {
		return &memberlist.Node{Name: name, Addr: net.ParseIP("10.0.0.2"), Port: 7946, Meta: meta}
	}
	state := func(name string) State {
		for _, mem := range m.Members() {
			if mem.Name == name {
				return mem.State
			}
		}
		return ""
	}
	d.NotifyJoin(node("a", nil))
	d.NotifyJoin(node("b", nil))
	d.NotifyJoin(node("c", nil))
	require.Equal(t, 3, m.NumAlive())

	steps := []struct {
		name  string
		do    func()
		want  map[string]State
		alive int
	}{
		{
			name:  "failed probe makes a member suspect",
			do:    func() { _, _ = w.Write([]byte("[INFO] memberlist: Suspect b has failed, no acks received\n")) },
			want:  map[string]State{"a": StateAlive, "b": StateSuspect, "c": StateAlive},
			alive: 3,
		},
		{
			name:  "other log lines change nothing",
			do:    func() { _, _ = w.Write([]byte("[DEBUG] memberlist: Failed UDP ping: c (timeout reached)\n")) },
			want:  map[string]State{"b": StateSuspect, "c": StateAlive},
			alive: 3,
		},
		{
			name:  "own suspicion is ignored",
			do:    func() { _, _ = w.Write([]byte("[INFO] memberlist: Suspect a has failed, no acks received\n")) },
			want:  map[string]State{"a": StateAlive},
			alive: 3,
		},
		{
			name:  "an answered probe clears suspicion",
			do:    func() { d.NotifyPingComplete(node("b", nil), time.Millisecond, nil) },
			want:  map[string]State{"b": StateAlive},
			alive: 3,
		},
		{
			name: "an unresolved suspicion expires",
			do: func() {
				_, _ = w.Write([]byte("[INFO] memberlist: Suspect c has failed, no acks received\n"))
				require.Equal(t, StateSuspect, state("c"))
				clk.Step(maxSuspicion(m.mlBase, 3) + time.Millisecond)
			},
			want:  map[string]State{"c": StateAlive},
			alive: 3,
		},
		{
			name:  "failure",
			do:    func() { d.NotifyLeave(node("c", nil)) },
			want:  map[string]State{"c": StateDead},
			alive: 2,
		},
		{
			name:  "dead members are not suspected",
			do:    func() { _, _ = w.Write([]byte("[INFO] memberlist: Suspect c has failed, no acks received\n")) },
			want:  map[string]State{"c": StateDead},
			alive: 2,
		},
		{
			name: "graceful leave",
			do: func() {
				d.NotifyUpdate(node("b", leavingMeta(Meta{})))
				d.NotifyLeave(node("b", leavingMeta(Meta{})))
			},
			want:  map[string]State{"b": StateLeft, "c": StateDead},
			alive: 1,
		},
		{
			name: "dead and left members are forgotten after the retention",
			do: func() {
				clk.Step(m.tune.retention + time.Second)
				m.prune()
			},
			want:  map[string]State{"a": StateAlive, "b": "", "c": ""},
			alive: 1,
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			for name, want := range s.want {
				require.Equal(t, want, state(name), "state of %s", name)
			}
			require.Equal(t, s.alive, m.NumAlive())
		})
	}
	// The update that only set the leaving flag is not an event.
	for ev, want := range map[Event]float64{EventJoin: 3, EventLeave: 2, EventUpdate: 0} {
		var out dto.Metric
		require.NoError(t, m.events.WithLabelValues(string(ev)).Write(&out))
		require.Equal(t, want, out.GetCounter().GetValue(), "events of kind %s", ev)
	}
}
