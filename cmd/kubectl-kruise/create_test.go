package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// crrServer is an API server for ContainerRecreateRequests in namespace
// "ns": it stores what is created, names it, and, on the next GET, shows
// it completed with status.
type crrServer struct {
	mu      sync.Mutex
	created *v1alpha1.ContainerRecreateRequest
	status  v1alpha1.ContainerRecreateRequestStatus
	deny    string
}

func (s *crrServer) start(t *testing.T) string {
	t.Helper()
	const path = "/apis/apps.kruise.io/v1alpha1/namespaces/ns/containerrecreaterequests"
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if s.deny != "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Message: s.deny, Code: 422, Reason: metav1.StatusReasonInvalid})
			return
		}
		var c v1alpha1.ContainerRecreateRequest
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if c.Name == "" {
			c.Name = c.GenerateName + "x7k2p"
		}
		s.created = c.DeepCopy()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	})
	mux.HandleFunc("GET "+path+"/{name}", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		c := s.created.DeepCopy()
		c.Status = s.status
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return writeKubeconfig(t, srv.URL)
}

func TestCreateCRR(t *testing.T) {
	done := v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true},
			{Name: "sidecar", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true},
		}}
	failed := v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: v1alpha1.ContainerRecreateRequestFailed, Message: "kill container error: boom"},
		}}
	for _, tc := range []struct {
		name       string
		args       []string
		status     v1alpha1.ContainerRecreateRequestStatus
		deny       string
		wantCode   int
		wantOut    []string
		wantErr    []string
		wantCreate func(t *testing.T, c *v1alpha1.ContainerRecreateRequest)
	}{
		{
			name:     "defaults",
			args:     []string{"create", "crr", "web-0", "--containers", "app,sidecar"},
			wantCode: exitOK,
			wantOut:  []string{"containerrecreaterequest.apps.kruise.io/web-0-x7k2p created"},
			wantCreate: func(t *testing.T, c *v1alpha1.ContainerRecreateRequest) {
				require.Equal(t, "web-0-", c.GenerateName)
				require.Equal(t, "web-0", c.Spec.PodName)
				require.Equal(t, []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}, {Name: "sidecar"}}, c.Spec.Containers)
				require.Equal(t, &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: "Fail"}, c.Spec.Strategy)
				require.Nil(t, c.Spec.ActiveDeadlineSeconds)
				require.Nil(t, c.Spec.TTLSecondsAfterFinished)
			},
		},
		{
			name: "every strategy flag",
			args: []string{"create", "containerrecreaterequest", "web-0", "--containers", "app", "--name", "r1", "--ordered", "--force",
				"--failure-policy", "Ignore", "--termination-grace-period", "0", "--unready-grace-period", "2", "--min-started-seconds", "5",
				"--active-deadline-seconds", "60", "--ttl-seconds-after-finished", "0"},
			wantCode: exitOK,
			wantOut:  []string{"containerrecreaterequest.apps.kruise.io/r1 created"},
			wantCreate: func(t *testing.T, c *v1alpha1.ContainerRecreateRequest) {
				require.Equal(t, "r1", c.Name)
				require.Equal(t, &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: "Ignore", OrderedRecreate: true, ForceRecreate: true,
					TerminationGracePeriodSeconds: ptr.To[int64](0), UnreadyGracePeriodSeconds: ptr.To[int64](2), MinStartedSeconds: 5}, c.Spec.Strategy)
				require.Equal(t, ptr.To[int64](60), c.Spec.ActiveDeadlineSeconds)
				require.Equal(t, ptr.To[int32](0), c.Spec.TTLSecondsAfterFinished)
			},
		},
		{
			name: "wait for success", args: []string{"create", "crr", "web-0", "--containers", "app,sidecar", "--wait", "10s"},
			status: done, wantCode: exitOK,
			wantOut: []string{"phase: Completed", "  app: Succeeded (stopped)", "  sidecar: Succeeded (stopped)"},
		},
		{
			name: "wait for a failure", args: []string{"create", "crr", "web-0", "--containers", "app", "--wait", "10s"},
			status: failed, wantCode: exitError,
			wantOut: []string{"  app: Failed - kill container error: boom"},
			wantErr: []string{"completed, but container app is Failed"},
		},
		{
			name: "webhook denial passed on", args: []string{"create", "crr", "web-0", "--containers", "foo"},
			deny:     `spec.containers[0].name: container "foo" is not in pod "web-0" (its containers: app, sidecar)`,
			wantCode: exitError,
			wantErr:  []string{`create ContainerRecreateRequest for pod ns/web-0:`, `container "foo" is not in pod "web-0" (its containers: app, sidecar)`},
		},
		{name: "no containers", args: []string{"create", "crr", "web-0"}, wantCode: exitUsage, wantErr: []string{`--containers is required: name the containers of pod "web-0"`}},
		{name: "no pod", args: []string{"create", "crr", "--containers", "a"}, wantCode: exitUsage, wantErr: []string{"takes exactly one pod name, got 0"}},
		{name: "bad policy", args: []string{"create", "crr", "p", "--containers", "a", "--failure-policy", "Retry"}, wantCode: exitUsage, wantErr: []string{`--failure-policy "Retry": use Fail or Ignore`}},
		{name: "short deadline", args: []string{"create", "crr", "p", "--containers", "a", "--active-deadline-seconds", "2"}, wantCode: exitUsage, wantErr: []string{"--active-deadline-seconds 2: must be at least 3"}},
		{name: "unknown kind", args: []string{"create", "clonesett"}, wantCode: exitUsage, wantErr: []string{`unknown command "clonesett"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &crrServer{status: tc.status, deny: tc.deny}
			kubeconfig := s.start(t)
			var stdout, stderr bytes.Buffer
			args := append(tc.args, "--kubeconfig", kubeconfig, "-n", "ns")
			if tc.name == "unknown kind" {
				args = tc.args
			}
			code := run(context.Background(), args, &stdout, &stderr)
			require.Equal(t, tc.wantCode, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			for _, w := range tc.wantOut {
				require.Contains(t, stdout.String(), w)
			}
			for _, w := range tc.wantErr {
				require.Contains(t, stderr.String(), w)
			}
			if tc.wantCreate != nil {
				s.mu.Lock()
				defer s.mu.Unlock()
				require.NotNil(t, s.created)
				tc.wantCreate(t, s.created)
			}
		})
	}
}
