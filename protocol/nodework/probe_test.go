package nodework

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

func probeItem(mutate func(s *nodeworkv1.ProbeSpec)) *nodeworkv1.CoordinatorMessage {
	s := &nodeworkv1.ProbeSpec{
		PodNamespace: "default", PodName: "game-0", PodUid: "7e1f", PodIp: "10.244.1.7",
		Probes: []*nodeworkv1.PodProbe{{Name: "game-server-probe#idle", ContainerName: "game", ProbeJson: []byte(`{"exec":{"command":["/home/idle.sh"]}}`)}},
	}
	if mutate != nil {
		mutate(s)
	}
	it := &nodeworkv1.WorkItem{Id: ProbeID("default", "game-0"), Generation: 1, Kind: KindProbe, Spec: &nodeworkv1.WorkItem_Probe{Probe: s}}
	return &nodeworkv1.CoordinatorMessage{Seq: 2, Body: &nodeworkv1.CoordinatorMessage_Upsert{Upsert: it}}
}

func TestValidateProbeSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(s *nodeworkv1.ProbeSpec)
		want   string
	}{
		{"valid", nil, ""},
		{"no pod ip yet", func(s *nodeworkv1.ProbeSpec) { s.PodIp = "" }, ""},
		{"no pod uid", func(s *nodeworkv1.ProbeSpec) { s.PodUid = "" }, "upsert.probe.podUid: 0 bytes"},
		{"no probes", func(s *nodeworkv1.ProbeSpec) { s.Probes = nil }, "upsert.probe.probes: 0, want 1..64"},
		{"too many probes", func(s *nodeworkv1.ProbeSpec) {
			for i := range 64 {
				s.Probes = append(s.Probes, &nodeworkv1.PodProbe{Name: "p#" + strings.Repeat("x", i+1), ContainerName: "c", ProbeJson: []byte("{}")})
			}
		}, "probes: 65, want 1..64"},
		{"duplicate name", func(s *nodeworkv1.ProbeSpec) { s.Probes = append(s.Probes, s.Probes[0]) }, `probes[1].name: "game-server-probe#idle" twice`},
		{"no container", func(s *nodeworkv1.ProbeSpec) { s.Probes[0].ContainerName = "" }, "probes[0].containerName: 0 bytes"},
		{"no probe", func(s *nodeworkv1.ProbeSpec) { s.Probes[0].ProbeJson = nil }, "probes[0].probeJson: 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCoordinatorMessage(probeItem(tc.mutate))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrProtocol)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestValidateProbeStatus(t *testing.T) {
	rep := func(mutate func(s *nodeworkv1.ProbeStatus)) *nodeworkv1.AgentMessage {
		s := &nodeworkv1.ProbeStatus{PodUid: "7e1f", Probes: []*nodeworkv1.ProbeResult{{
			Name: "game-server-probe#idle", State: nodeworkv1.ProbeState_PROBE_STATE_FAILED, Message: "not idle",
		}}}
		if mutate != nil {
			mutate(s)
		}
		return report(2, func(r *nodeworkv1.WorkReport) {
			r.Id, r.Kind = ProbeID("default", "game-0"), KindProbe
			r.Status = &nodeworkv1.WorkReport_Probe{Probe: s}
		})
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *nodeworkv1.ProbeStatus)
		want   string
	}{
		{"valid", nil, ""},
		{"unknown state", func(s *nodeworkv1.ProbeStatus) { s.Probes[0].State = 9 }, "report.probe.probes[0].state: 9 is not a known state"},
		{"no name", func(s *nodeworkv1.ProbeStatus) { s.Probes[0].Name = "" }, "report.probe.probes[0].name: 0 bytes"},
		{"long message", func(s *nodeworkv1.ProbeStatus) { s.Probes[0].Message = strings.Repeat("x", 1025) }, "probes[0].message: 1025 bytes, at most 1024"},
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

func TestProbeKind(t *testing.T) {
	m := probeItem(nil)
	require.Equal(t, KindProbe, KindOf(m.GetUpsert()))
	require.True(t, KnownKind(KindProbe))
	m.GetUpsert().Kind = KindPull
	require.ErrorContains(t, ValidateCoordinatorMessage(m), `kind: "pull" but the spec is a "probe"`)
}
