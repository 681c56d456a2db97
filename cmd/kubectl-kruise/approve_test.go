package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// kruiseRollout is a Kruise Rollout at version in canary step state.
func kruiseRollout(version, name, state string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rollouts.kruise.io/" + version, "kind": "Rollout",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"status":   map[string]any{"canaryStatus": map[string]any{"currentStepIndex": int64(1), "currentStepState": state}},
	}}
}

func TestRolloutApprove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		args    []string
		code    int
		out     string
		errText string
		state   string // the Rollout's state afterwards
	}{
		{name: "paused v1beta1 goes on", objs: []runtime.Object{kruiseRollout("v1beta1", "demo", "StepPaused")},
			args: []string{"rollout/demo"}, out: "rollout.rollouts.kruise.io/demo approved\n", state: "StepReady"},
		{name: "paused v1alpha1 goes on", objs: []runtime.Object{kruiseRollout("v1alpha1", "old", "StepPaused")},
			args: []string{"rollout", "old"}, out: "rollout.rollouts.kruise.io/old approved\n", state: "StepReady"},
		{name: "not paused", objs: []runtime.Object{kruiseRollout("v1beta1", "demo", "StepUpgrade")},
			args: []string{"rollout/demo"}, code: 1, errText: `its canary step state is "StepUpgrade", not StepPaused`, state: "StepUpgrade"},
		{name: "missing", args: []string{"rollout/none"}, code: 1, errText: "rollout ns/none not found"},
		{name: "a CloneSet", args: []string{"cloneset/web"}, code: 2, errText: "lower spec.updateStrategy.partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
				rolloutVersions[0]: "RolloutList", rolloutVersions[1]: "RolloutList",
			}, tc.objs...)
			e := newFakeCluster().env()
			e.dynamic = func(*globalOptions) (dynamic.Interface, string, error) { return dyn, "ns", nil }
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), newRootCommandEnv(&stdout, &stderr, e), append([]string{"rollout", "approve"}, tc.args...), &stderr)
			require.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			require.Equal(t, tc.out, stdout.String())
			require.Contains(t, stderr.String(), tc.errText)
			if tc.state == "" {
				return
			}
			for _, v := range rolloutVersions {
				r, err := dyn.Resource(v).Namespace("ns").Get(context.Background(), tc.objs[0].(*unstructured.Unstructured).GetName(), metav1.GetOptions{})
				if err != nil {
					continue
				}
				state, _, _ := unstructured.NestedString(r.Object, "status", "canaryStatus", "currentStepState")
				require.Equal(t, tc.state, state)
			}
		})
	}
}
