package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
)

// fakeAPIServer serves /version, /apis and the resource lists of the
// groups given, and returns a kubeconfig file naming it.
func fakeAPIServer(t *testing.T, groups map[string][]metav1.APIResource) string {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(path string, v any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	reply("/version", apiversion.Info{GitVersion: "v1.36.3"})
	list := metav1.APIGroupList{Groups: []metav1.APIGroup{{
		Name:     "apps",
		Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}},
	}}}
	for _, gv := range slices.Sorted(maps.Keys(groups)) {
		resources := groups[gv]
		group, v, _ := strings.Cut(gv, "/")
		i := -1
		for j := range list.Groups {
			if list.Groups[j].Name == group {
				i = j
			}
		}
		if i < 0 {
			list.Groups = append(list.Groups, metav1.APIGroup{Name: group})
			i = len(list.Groups) - 1
		}
		list.Groups[i].Versions = append(list.Groups[i].Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v})
		reply("/apis/"+gv, metav1.APIResourceList{GroupVersion: gv, APIResources: resources})
	}
	reply("/apis", list)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return writeKubeconfig(t, srv.URL)
}

// writeKubeconfig writes a kubeconfig for server and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

func TestRun(t *testing.T) {
	kruise := fakeAPIServer(t, map[string][]metav1.APIResource{
		"apps.kruise.io/v1alpha1": {{Name: "clonesets"}, {Name: "clonesets/status"}, {Name: "sidecarsets"}},
		"apps.kruise.io/v1beta1":  {{Name: "statefulsets"}, {Name: "statefulsets/scale"}},
	})
	plain := fakeAPIServer(t, nil)
	unreachable := writeKubeconfig(t, "http://127.0.0.1:1")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	old := version
	version = "v9.9.9-test"
	t.Cleanup(func() { version = old })

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		notStdout  []string
	}{
		{
			name:       "no arguments prints help",
			wantStdout: []string{"kubectl kruise [command]", "version"},
		},
		{
			name:       "help lists the commands",
			args:       []string{"--help"},
			wantStdout: []string{"Usage:", "kubectl kruise [command]", "Available Commands:", "version", "Print the plugin's version"},
			notStdout:  []string{"completion"},
		},
		{
			name:       "help of version",
			args:       []string{"help", "version"},
			wantStdout: []string{"kubectl kruise version [flags]", "--client", "--kubeconfig"},
		},
		{
			name:       "unknown command",
			args:       []string{"expose"},
			wantCode:   exitUsage,
			wantStderr: []string{`unknown command "expose" for "kubectl kruise"`, "Run 'kubectl kruise --help' for usage."},
		},
		{
			name:       "unknown command close to one",
			args:       []string{"versoin"},
			wantCode:   exitUsage,
			wantStderr: []string{`unknown command "versoin"`, "Did you mean this?", "version"},
		},
		{
			name:       "unknown flag",
			args:       []string{"version", "--bogus"},
			wantCode:   exitUsage,
			wantStderr: []string{"unknown flag: --bogus"},
		},
		{
			name:       "stray argument",
			args:       []string{"version", "extra"},
			wantCode:   exitUsage,
			wantStderr: []string{`"kubectl kruise version" takes no arguments`},
		},
		{
			name:       "client only",
			args:       []string{"version", "--client"},
			wantStdout: []string{"Plugin version: v9.9.9-test"},
			notStdout:  []string{"Server"},
		},
		{
			name: "server with Kruise",
			args: []string{"version", "--kubeconfig", kruise},
			wantStdout: []string{
				"Plugin version: v9.9.9-test",
				"Server version: v1.36.3",
				"apps.kruise.io CRDs: installed: v1alpha1 (2 resources), v1beta1 (1 resources)",
				"policy.kruise.io CRDs: not installed",
			},
		},
		{
			name:       "server without Kruise",
			args:       []string{"version", "--kubeconfig", plain},
			wantStdout: []string{"Server version: v1.36.3", "apps.kruise.io CRDs: not installed"},
		},
		{
			name:       "unreachable server is a note",
			args:       []string{"version", "--kubeconfig", unreachable, "--request-timeout", "5s"},
			wantStdout: []string{"Plugin version: v9.9.9-test"},
			wantStderr: []string{"Server: unavailable: server version:"},
			notStdout:  []string{"Server version"},
		},
		{
			name:       "missing kubeconfig is a note",
			args:       []string{"version", "--kubeconfig", filepath.Join(t.TempDir(), "missing")},
			wantStdout: []string{"Plugin version: v9.9.9-test"},
			wantStderr: []string{"Server: unavailable: load kubeconfig:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			require.Equal(t, tt.wantCode, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			for _, s := range tt.wantStdout {
				require.Contains(t, stdout.String(), s)
			}
			for _, s := range tt.notStdout {
				require.NotContains(t, stdout.String(), s)
			}
			for _, s := range tt.wantStderr {
				require.Contains(t, stderr.String(), s)
			}
		})
	}
}
