package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// gameMarker is PodProbeMarker ns/game: one exec probe "idle" with a pod
// condition and a marker policy for each state.
func gameMarker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "game", Generation: 2, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name:          "idle",
				ContainerName: "game",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"/home/game/idle.sh"}},
				}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
					{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"idle": "true"},
						Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}},
					{State: v1alpha1.ProbeFailed, Labels: map[string]string{"idle": "false"}},
				},
				PodConditionType: "game.io/idle",
			}},
		},
		Status: v1alpha1.PodProbeMarkerStatus{ObservedGeneration: 2, MatchedPods: 2},
	}
}

// dbMarker is PodProbeMarker ns/db: an exec, a tcp and an http probe.
func dbMarker() *v1alpha1.PodProbeMarker {
	probe := func(name, container string, h corev1.ProbeHandler, cond string, mp ...v1alpha1.ProbeMarkerPolicy) v1alpha1.PodContainerProbe {
		return v1alpha1.PodContainerProbe{Name: name, ContainerName: container, PodConditionType: cond, MarkerPolicy: mp,
			Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h}}}
	}
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-26 * time.Hour))},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"postgres"}}}},
			Probes: []v1alpha1.PodContainerProbe{
				probe("main", "postgres", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "psql -tAc 'select 1' | grep -q t"}}}, "",
					v1alpha1.ProbeMarkerPolicy{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"role": "main"}}),
				probe("port", "postgres", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, "db.io/port-open"),
				probe("health", "exporter", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("metrics")}}, "db.io/healthy"),
			},
		},
		Status: v1alpha1.PodProbeMarkerStatus{ObservedGeneration: 1, MatchedPods: 1},
	}
}

// longMessage is a probe output longer than the table shows.
const longMessage = "idle: 0 players connected, last match ended 4m ago, map de_dust2 unloaded\nready for allocation"

// gamePods is the coordinator's view of gameMarker: game-0 idle (with a
// message longer than the table shows), game-1 not probed yet.
func gamePods() *probeview.MarkerPods {
	return &probeview.MarkerPods{Namespace: "ns", Name: "game", Pods: []probeview.PodProbes{
		{Name: "game-0", UID: "u0", Node: "node-1", Probes: []probeview.ProbeState{
			{Name: "idle", State: probeview.StateSucceeded, Message: longMessage,
				LastProbeTime: now.Add(-12 * time.Second), LastTransitionTime: now.Add(-3 * time.Minute)},
		}},
		{Name: "game-1", UID: "u1", Node: "node-2", Probes: []probeview.ProbeState{
			{Name: "idle", State: probeview.StateUnknown},
		}},
	}}
}

const (
	wantGameMarker = "" +
		"PodProbeMarker ns/game: selector app=game, 2 matched pods (observed generation 2 of 2)\n" +
		"PROBE   CONTAINER   HANDLER                    CONDITION      MARKERS\n" +
		"idle    game        exec: /home/game/idle.sh   game.io/idle   Succeeded: label idle=true, annotation controller.kubernetes.io/pod-deletion-cost=-10; Failed: label idle=false\n"
	wantGamePods = "" +
		"POD      NODE     STATE       LAST-PROBE   MESSAGE\n" +
		"game-0   node-1   Succeeded   12s          idle: 0 players connected, last match ended 4m ago, map de_d... (truncated)\n" +
		"game-1   node-2   Unknown     -\n"
	wantDBMarker = "" +
		"PodProbeMarker ns/db: selector app in (postgres), 1 matched pods (observed generation 1 of 1)\n" +
		"PROBE    CONTAINER   HANDLER                                          CONDITION         MARKERS\n" +
		"main     postgres    exec: sh -c \"psql -tAc 'select 1' | grep -q t\"   <none>            Succeeded: label role=main\n" +
		"port     postgres    tcp :5432                                        db.io/port-open   <none>\n" +
		"health   exporter    http GET :metrics/healthz                        db.io/healthy     <none>\n"
)

func TestGetPodProbeMarker(t *testing.T) {
	services := schema.GroupResource{Resource: "services"}
	for _, tc := range []struct {
		name string
		args []string
		// proxy is the coordinator (nil: not to be asked).
		proxy       func(string) ([]byte, error)
		code        int
		wantStdout  string
		wantStderr  string
		wantProxied []string
	}{
		{
			name: "list",
			args: []string{"get", "podprobemarker"},
			wantStdout: "" +
				"NAME   PROBES   MATCHED   AGE\n" +
				"db     3        1         26h\n" +
				"game   1        2         60m\n",
		},
		{
			name:       "list of an empty namespace",
			args:       []string{"get", "podprobemarkers", "-n", "empty"},
			wantStderr: "No PodProbeMarkers found in namespace empty.\n",
		},
		{
			name:       "one marker without --pods",
			args:       []string{"get", "podprobemarker", "game"},
			wantStdout: wantGameMarker,
		},
		{
			name:       "handlers and several probes",
			args:       []string{"get", "podprobemarker", "db", "-n", "ns"},
			wantStdout: wantDBMarker,
		},
		{
			name:        "--pods: one pod Succeeded, one Unknown",
			args:        []string{"get", "podprobemarker", "game", "--pods"},
			proxy:       func(string) ([]byte, error) { return json.Marshal(gamePods()) },
			wantStdout:  wantGameMarker + "\n" + wantGamePods,
			wantProxied: []string{"shoal-system/shoal-coordinator:http /podprobemarkers/ns/game"},
		},
		{
			name: "--pods with several probes and another coordinator Service",
			args: []string{"get", "podprobemarker", "db", "--pods", "--coordinator-namespace", "infra", "--coordinator-service", "coord"},
			proxy: func(string) ([]byte, error) {
				return json.Marshal(&probeview.MarkerPods{Namespace: "ns", Name: "db", Pods: []probeview.PodProbes{{
					Name: "pg-0", Node: "node-3", Probes: []probeview.ProbeState{
						{Name: "main", State: probeview.StateFailed, LastProbeTime: now.Add(-2 * time.Minute)},
						{Name: "port", State: probeview.StateSucceeded, LastProbeTime: now.Add(-5 * time.Second)},
						{Name: "health", State: probeview.StateFailed, Message: "HTTP probe failed with statuscode: 503", LastProbeTime: now.Add(-7 * time.Second)},
					},
				}}})
			},
			wantStdout: wantDBMarker + "\n" +
				"POD    NODE     STATE(main)   STATE(port)   STATE(health)   LAST-PROBE   MESSAGE(main)   MESSAGE(port)   MESSAGE(health)\n" +
				"pg-0   node-3   Failed        Succeeded     Failed          5s           -               -               HTTP probe failed with statuscode: 503\n",
			wantProxied: []string{"infra/coord:http /podprobemarkers/ns/db"},
		},
		{
			name: "--pods of a marker that selects no pods",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return json.Marshal(&probeview.MarkerPods{Namespace: "ns", Name: "game"})
			},
			wantStdout: wantGameMarker + "\nNo pods: PodProbeMarker ns/game selects no scheduled, initialized pods.\n",
		},
		{
			name: "coordinator 503: the marker, then why the pods are missing",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return nil, apierrors.NewGenericServerResponse(503, "get", services, "http:shoal-coordinator:http", "not the leader", 0, true)
			},
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: "error: pods of PodProbeMarker ns/game: no coordinator leader reachable: service shoal-system/shoal-coordinator: " +
				"not the leader (a leader may be being elected; try again)\n",
		},
		{
			name: "no endpoints",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return nil, apierrors.NewServiceUnavailable(`no endpoints available for service "shoal-coordinator"`)
			},
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: `error: pods of PodProbeMarker ns/game: no coordinator leader reachable: service shoal-system/shoal-coordinator: ` +
				`no endpoints available for service "shoal-coordinator" (a leader may be being elected; try again)` + "\n",
		},
		{
			name:       "no such service",
			args:       []string{"get", "podprobemarker", "game", "--pods"},
			proxy:      func(string) ([]byte, error) { return nil, apierrors.NewNotFound(services, "shoal-coordinator") },
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: `error: pods of PodProbeMarker ns/game: no coordinator leader reachable: service shoal-system/shoal-coordinator: ` +
				`services "shoal-coordinator" not found (see --coordinator-namespace, --coordinator-service)` + "\n",
		},
		{
			name: "coordinator does not know the marker",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return nil, apierrors.NewGenericServerResponse(404, "get", services, "http:shoal-coordinator:http", "PodProbeMarker ns/game not found", 0, true)
			},
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: "error: pods of PodProbeMarker ns/game: the coordinator does not know the marker yet (it has not seen it, or it was just deleted); try again\n",
		},
		{
			name: "no right to proxy",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services/proxy"}, "shoal-coordinator", errors.New("RBAC: access denied"))
			},
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: "(this needs get on services/proxy in namespace shoal-system)\n",
		},
		{
			name: "coordinator unreachable",
			args: []string{"get", "podprobemarker", "game", "--pods"},
			proxy: func(string) ([]byte, error) {
				return nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
			},
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: "error: pods of PodProbeMarker ns/game: no coordinator leader reachable through service shoal-system/shoal-coordinator: " +
				"dial tcp 10.0.0.1:443: connect: connection refused\n",
		},
		{
			name:       "an answer that is not a view",
			args:       []string{"get", "podprobemarker", "game", "--pods"},
			proxy:      func(string) ([]byte, error) { return []byte("<html>"), nil },
			code:       exitError,
			wantStdout: wantGameMarker,
			wantStderr: "error: pods of PodProbeMarker ns/game: decode the coordinator's view: invalid character",
		},
		{
			name:       "no such marker",
			args:       []string{"get", "podprobemarker", "gone", "--pods"},
			code:       exitError,
			wantStderr: `error: get PodProbeMarker ns/gone: podprobemarkers.apps.kruise.io "gone" not found` + "\n",
		},
		{
			name:       "--pods of every marker",
			args:       []string{"get", "podprobemarker", "--pods"},
			code:       exitUsage,
			wantStderr: "error: --pods needs a PodProbeMarker name",
		},
		{
			name:       "two names",
			args:       []string{"get", "podprobemarker", "a", "b"},
			code:       exitUsage,
			wantStderr: "takes at most one name, got 2 arguments",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(gameMarker(), dbMarker())
			f.proxy = func(path string) ([]byte, error) {
				require.NotNil(t, tc.proxy, "the coordinator is not to be asked, but was asked for %s", path)
				return tc.proxy(path)
			}
			code, stdout, stderr := f.run(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Equal(t, tc.wantStdout, stdout)
			if tc.code == exitOK {
				require.Equal(t, tc.wantStderr, stderr)
			} else {
				require.Contains(t, stderr, tc.wantStderr)
			}
			if tc.wantProxied != nil {
				require.Equal(t, tc.wantProxied, f.proxied)
			}
		})
	}
}

func TestProbeHandler(t *testing.T) {
	svc := "liveness"
	for _, tc := range []struct {
		h    corev1.ProbeHandler
		want string
	}{
		{corev1.ProbeHandler{}, "<none>"},
		{corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/home/game/idle.sh"}}}, "exec: /home/game/idle.sh"},
		{corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "", "a b"}}}, `exec: cat "" "a b"`},
		{corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, "tcp :8080"},
		{corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromString("game")}}, "tcp 10.0.0.1:game"},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, "http GET :8080/healthz"},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: "h", Port: intstr.FromInt32(443)}}, "https GET h:443"},
		{corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}, "grpc :9090"},
		{corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: &svc}}, "grpc :9090 service liveness"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, probeHandler(&corev1.Probe{ProbeHandler: tc.h}))
		})
	}
}

func TestProbeMessage(t *testing.T) {
	exact := strings.Repeat("x", maxProbeMessage)
	require.Equal(t, "", probeMessage(""))
	require.Equal(t, "a b", probeMessage(" a\n\tb \n"))
	require.Equal(t, exact, probeMessage(exact))
	require.Equal(t, exact+"... (truncated)", probeMessage(exact+"y"))
	require.Equal(t, strings.Repeat("é", maxProbeMessage)+"... (truncated)", probeMessage(strings.Repeat("é", 100)), "cut by characters, not bytes")
}

// TestGetPodProbeMarkerThroughServiceProxy runs the plugin against an API
// server, to check the proxy path and the coordinator's answers.
func TestGetPodProbeMarkerThroughServiceProxy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   func(w http.ResponseWriter)
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{
			name: "the view",
			answer: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(gamePods())
			},
			wantOut: wantGameMarker + "\n" + wantGamePods,
		},
		{
			name: "coordinator's 503",
			answer: func(w http.ResponseWriter) {
				http.Error(w, "this coordinator replica is not the leader", http.StatusServiceUnavailable)
			},
			wantCode: exitError,
			wantOut:  wantGameMarker,
			wantErr: "error: pods of PodProbeMarker ns/game: no coordinator leader reachable: service shoal-system/shoal-coordinator: " +
				"this coordinator replica is not the leader (a leader may be being elected; try again)\n",
		},
		{
			name:     "coordinator's 404",
			answer:   func(w http.ResponseWriter) { http.Error(w, "PodProbeMarker ns/game not found", http.StatusNotFound) },
			wantCode: exitError,
			wantOut:  wantGameMarker,
			wantErr:  "error: pods of PodProbeMarker ns/game: the coordinator does not know the marker yet",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var proxied string
			mux := http.NewServeMux()
			mux.HandleFunc("GET /apis/apps.kruise.io/v1alpha1/namespaces/ns/podprobemarkers/game", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(gameMarker())
			})
			mux.HandleFunc("GET /api/v1/namespaces/shoal-system/services/{service}/proxy/{path...}", func(w http.ResponseWriter, r *http.Request) {
				proxied = r.PathValue("service") + " /" + r.PathValue("path")
				tc.answer(w)
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			e := defaultEnv()
			e.now = func() time.Time { return now }
			var stdout, stderr bytesBuffer
			code := execute(context.Background(), newRootCommandEnv(&stdout, &stderr, e),
				[]string{"get", "podprobemarker", "game", "-n", "ns", "--pods", "--kubeconfig", writeKubeconfig(t, srv.URL)}, &stderr)
			require.Equal(t, tc.wantCode, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			require.Equal(t, "http:shoal-coordinator:http /podprobemarkers/ns/game", proxied)
			require.Equal(t, tc.wantOut, stdout.String())
			require.Contains(t, stderr.String(), tc.wantErr)
		})
	}
}
