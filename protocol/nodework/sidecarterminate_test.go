package nodework

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

func sidecarTerminateItem(mutate func(s *nodeworkv1.SidecarTerminateSpec)) *nodeworkv1.CoordinatorMessage {
	s := &nodeworkv1.SidecarTerminateSpec{
		PodNamespace: "default", PodName: "job-1-abcde", PodUid: "7e1f",
		MainContainers:           []string{"main"},
		SidecarContainers:        []string{"log"},
		IgnoreExitCodeContainers: []string{"proxy"},
		RestartPolicy:            nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_NEVER,
		TerminationGraceSeconds:  30,
	}
	if mutate != nil {
		mutate(s)
	}
	it := &nodeworkv1.WorkItem{Id: SidecarTerminateID("default", "job-1-abcde"), Generation: 1, Kind: KindSidecarTerminate,
		Spec: &nodeworkv1.WorkItem_SidecarTerminate{SidecarTerminate: s}}
	return &nodeworkv1.CoordinatorMessage{Seq: 2, Body: &nodeworkv1.CoordinatorMessage_Upsert{Upsert: it}}
}

func TestValidateSidecarTerminateSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *nodeworkv1.SidecarTerminateSpec)
		want   string
	}{
		{"valid", nil, ""},
		{"no mains (every container is a sidecar)", func(s *nodeworkv1.SidecarTerminateSpec) { s.MainContainers = nil }, ""},
		{"only ignore-exit-code sidecars", func(s *nodeworkv1.SidecarTerminateSpec) { s.SidecarContainers = nil }, ""},
		{"on failure", func(s *nodeworkv1.SidecarTerminateSpec) {
			s.RestartPolicy = nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
		}, ""},
		{"no pod uid", func(s *nodeworkv1.SidecarTerminateSpec) { s.PodUid = "" }, "upsert.sidecarTerminate.podUid: 0 bytes"},
		{"no sidecars", func(s *nodeworkv1.SidecarTerminateSpec) { s.SidecarContainers, s.IgnoreExitCodeContainers = nil, nil },
			"0 sidecarContainers and ignoreExitCodeContainers, want 1..64 together"},
		{"too many mains", func(s *nodeworkv1.SidecarTerminateSpec) {
			for i := range 65 {
				s.MainContainers = append(s.MainContainers, "m"+strings.Repeat("x", i))
			}
		}, "mainContainers: 66, at most 64"},
		{"no restart policy", func(s *nodeworkv1.SidecarTerminateSpec) { s.RestartPolicy = 0 }, "restartPolicy: 0, want NEVER or ON_FAILURE"},
		{"unknown restart policy", func(s *nodeworkv1.SidecarTerminateSpec) { s.RestartPolicy = 7 }, "restartPolicy: 7"},
		{"negative grace", func(s *nodeworkv1.SidecarTerminateSpec) { s.TerminationGraceSeconds = -1 }, "terminationGraceSeconds: -1, want 0..86400"},
		{"empty name", func(s *nodeworkv1.SidecarTerminateSpec) { s.SidecarContainers = []string{""} }, "sidecarContainers[0]: 0 bytes"},
		{"main is also a sidecar", func(s *nodeworkv1.SidecarTerminateSpec) { s.SidecarContainers = []string{"main"} },
			`sidecarContainers[0]: "main" is also in mainContainers`},
		{"in both sidecar lists", func(s *nodeworkv1.SidecarTerminateSpec) { s.IgnoreExitCodeContainers = []string{"log"} },
			`ignoreExitCodeContainers[0]: "log" is also in sidecarContainers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCoordinatorMessage(sidecarTerminateItem(tc.mutate))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestValidateSidecarTerminateStatus(t *testing.T) {
	rep := func(mutate func(s *nodeworkv1.SidecarTerminateStatus)) *nodeworkv1.AgentMessage {
		s := &nodeworkv1.SidecarTerminateStatus{
			PodUid: "7e1f", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE,
			Mains:    []*nodeworkv1.SidecarTerminateContainerState{{Name: "main", ContainerId: "abc", Exited: true}},
			Sidecars: []*nodeworkv1.SidecarTerminateContainerState{{Name: "log", Exited: true, ExitCode: 143, Stops: 1, StopMillis: 40}},
		}
		if mutate != nil {
			mutate(s)
		}
		return report(2, func(r *nodeworkv1.WorkReport) {
			r.Id, r.Kind = SidecarTerminateID("default", "job-1-abcde"), KindSidecarTerminate
			r.Status = &nodeworkv1.WorkReport_SidecarTerminate{SidecarTerminate: s}
		})
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *nodeworkv1.SidecarTerminateStatus)
		want   string
	}{
		{"valid", nil, ""},
		{"stage 0", func(s *nodeworkv1.SidecarTerminateStatus) { s.Stage = 0 }, "report.sidecarTerminate.stage: 0 is not a sidecar-terminate stage"},
		{"stage 9", func(s *nodeworkv1.SidecarTerminateStatus) { s.Stage = 9 }, "stage: 9"},
		{"negative delay", func(s *nodeworkv1.SidecarTerminateStatus) { s.StopDelayMillis = -1 }, "stopDelayMillis: negative"},
		{"no name", func(s *nodeworkv1.SidecarTerminateStatus) { s.Sidecars[0].Name = "" }, "report.sidecarTerminate.sidecars[0].name: 0 bytes"},
		{"negative stops", func(s *nodeworkv1.SidecarTerminateStatus) { s.Sidecars[0].Stops = -1 }, "sidecars[0]: negative stops"},
		{"long message", func(s *nodeworkv1.SidecarTerminateStatus) { s.Mains[0].Message = strings.Repeat("x", 1025) }, "mains[0].message: 1025 bytes"},
		{"long id", func(s *nodeworkv1.SidecarTerminateStatus) { s.Mains[0].ContainerId = strings.Repeat("x", 513) }, "mains[0].containerId: 513 bytes"},
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

func TestSidecarTerminateKind(t *testing.T) {
	m := sidecarTerminateItem(nil)
	require.Equal(t, KindSidecarTerminate, KindOf(m.GetUpsert()))
	require.True(t, KnownKind(KindSidecarTerminate))
	require.Equal(t, []string{"log", "proxy"}, SidecarTerminateSidecars(m.GetUpsert().GetSidecarTerminate()))
	m.GetUpsert().Kind = KindRecreate
	require.ErrorContains(t, ValidateCoordinatorMessage(m), `kind: "recreate" but the spec is a "sidecar-terminate"`)
}
