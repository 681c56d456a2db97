package nodework

import (
	"strings"
	"testing"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
	"github.com/stretchr/testify/require"
)

func recreateItem(mutate func(s *nodeworkv1.RecreateSpec)) *nodeworkv1.CoordinatorMessage {
	s := &nodeworkv1.RecreateSpec{
		PodNamespace: "default", PodName: "web-0", PodUid: "6f0c", PodIp: "10.244.1.5",
		TerminationGraceSeconds: 30,
		Containers: []*nodeworkv1.RecreateContainer{
			{Name: "app", ContainerId: "containerd://abc", RestartCount: 0, PreStop: &nodeworkv1.PreStopHook{
				Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: &nodeworkv1.HTTPGetAction{Port: 8080, Path: "/drain"}},
			}},
			{Name: "sidecar", ContainerId: "containerd://def", RestartCount: 2, PreStop: &nodeworkv1.PreStopHook{
				Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: []string{"sh", "-c", "sleep 1"}}},
			}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	it := &nodeworkv1.WorkItem{Id: RecreateID("default", "crr-1"), Generation: 1, Kind: KindRecreate, Spec: &nodeworkv1.WorkItem_Recreate{Recreate: s}}
	return &nodeworkv1.CoordinatorMessage{Seq: 2, Body: &nodeworkv1.CoordinatorMessage_Upsert{Upsert: it}}
}

func TestValidateRecreateSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *nodeworkv1.RecreateSpec)
		want   string
	}{
		{"valid", nil, ""},
		{"no pod uid", func(s *nodeworkv1.RecreateSpec) { s.PodUid = "" }, "upsert.recreate.podUid: 0 bytes"},
		{"no containers", func(s *nodeworkv1.RecreateSpec) { s.Containers = nil }, "upsert.recreate.containers: 0, want 1..64"},
		{"duplicate container", func(s *nodeworkv1.RecreateSpec) { s.Containers[1].Name = "app" }, `containers[1].name: "app" appears twice`},
		{"no container id", func(s *nodeworkv1.RecreateSpec) { s.Containers[0].ContainerId = "" }, "containers[0].containerId: 0 bytes"},
		{"negative restarts", func(s *nodeworkv1.RecreateSpec) { s.Containers[0].RestartCount = -1 }, "containers[0].restartCount: negative"},
		{"negative grace", func(s *nodeworkv1.RecreateSpec) { s.TerminationGraceSeconds = -1 }, "terminationGraceSeconds: -1"},
		{"min started too long", func(s *nodeworkv1.RecreateSpec) { s.MinStartedSeconds = 100000 }, "minStartedSeconds: 100000"},
		{"hook port 0", func(s *nodeworkv1.RecreateSpec) {
			s.Containers[0].PreStop.GetHttpGet().Port = 0
		}, "containers[0].preStop.httpGet.port: 0"},
		{"hook scheme", func(s *nodeworkv1.RecreateSpec) {
			s.Containers[0].PreStop.GetHttpGet().Scheme = "ftp"
		}, `httpGet.scheme: "ftp"`},
		{"empty exec", func(s *nodeworkv1.RecreateSpec) {
			s.Containers[1].PreStop.GetExec().Command = nil
		}, "containers[1].preStop.exec.command: 0 arguments"},
		{"hook without action", func(s *nodeworkv1.RecreateSpec) {
			s.Containers[1].PreStop = &nodeworkv1.PreStopHook{}
		}, "containers[1].preStop: no action"},
		{"negative sleep", func(s *nodeworkv1.RecreateSpec) {
			s.Containers[1].PreStop = &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Sleep{Sleep: &nodeworkv1.SleepAction{Seconds: -2}}}
		}, "preStop.sleep.seconds: -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCoordinatorMessage(recreateItem(tc.mutate))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestValidateRecreateStatus(t *testing.T) {
	rep := func(mutate func(c *nodeworkv1.RecreateContainerState)) *nodeworkv1.AgentMessage {
		c := &nodeworkv1.RecreateContainerState{Name: "app", Phase: nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, IsKilled: true}
		if mutate != nil {
			mutate(c)
		}
		return report(2, func(r *nodeworkv1.WorkReport) {
			r.Id, r.Kind = RecreateID("default", "crr-1"), KindRecreate
			r.Status = &nodeworkv1.WorkReport_Recreate{Recreate: &nodeworkv1.RecreateStatus{Containers: []*nodeworkv1.RecreateContainerState{c}}}
		})
	}
	for _, tc := range []struct {
		name   string
		mutate func(c *nodeworkv1.RecreateContainerState)
		want   string
	}{
		{"valid", nil, ""},
		{"no name", func(c *nodeworkv1.RecreateContainerState) { c.Name = "" }, "report.recreate.containers[0].name: 0 bytes"},
		{"phase 0", func(c *nodeworkv1.RecreateContainerState) { c.Phase = 0 }, "containers[0].phase: 0 is not a recreate phase"},
		{"phase 9", func(c *nodeworkv1.RecreateContainerState) { c.Phase = 9 }, "containers[0].phase: 9"},
		{"long message", func(c *nodeworkv1.RecreateContainerState) { c.Message = strings.Repeat("x", 1025) }, "containers[0].message: 1025 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAgentMessage(rep(tc.mutate))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
