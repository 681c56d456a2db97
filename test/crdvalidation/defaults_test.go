package crdvalidation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestDefaults: the schema applies the defaults OpenKruise's mutating
// webhook applies, so `kubectl get -o yaml` shows the same object.
func TestDefaults(t *testing.T) {
	set := loadCRDs(t)
	cases := []struct {
		name     string
		manifest string
		want     map[string]any // dotted path → defaulted value
	}{
		{
			name: "ImagePullJob pull and completion policy",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: ImagePullJob
metadata: {name: j, namespace: default}
spec:
  image: nginx:1.25
  completionPolicy: {}`,
			want: map[string]any{
				"spec.pullPolicy.timeoutSeconds": int64(600),
				"spec.pullPolicy.backoffLimit":   int64(3),
				"spec.completionPolicy.type":     "Always",
				"spec.imagePullPolicy":           "IfNotPresent",
			},
		},
		{
			name: "ContainerRecreateRequest strategy",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: {name: r, namespace: default}
spec:
  podName: p
  containers: [{name: app}]`,
			want: map[string]any{"spec.strategy.failurePolicy": "Fail"},
		},
		{
			name: "CloneSet replicas and update strategy",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: c, namespace: default}
spec:
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: a, image: nginx}]}}`,
			want: map[string]any{
				"spec.replicas":                      int64(1),
				"spec.revisionHistoryLimit":          int64(10),
				"spec.updateStrategy.type":           "ReCreate",
				"spec.updateStrategy.partition":      int64(0),
				"spec.updateStrategy.maxUnavailable": "20%",
				"spec.updateStrategy.maxSurge":       int64(0),
			},
		},
		{
			name: "Advanced StatefulSet policies",
			manifest: `
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata: {name: s, namespace: default}
spec:
  serviceName: s
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: a, image: nginx}]}}`,
			want: map[string]any{
				"spec.replicas":            int64(1),
				"spec.podManagementPolicy": "OrderedReady",
				"spec.updateStrategy.type": "RollingUpdate",
				"spec.persistentVolumeClaimRetentionPolicy.whenDeleted": "Retain",
				"spec.persistentVolumeClaimRetentionPolicy.whenScaled":  "Retain",
			},
		},
		{
			name: "BroadcastJob parallelism and policies",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata: {name: b, namespace: default}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: a, image: busybox}]}}`,
			want: map[string]any{
				"spec.parallelism":           int64(2147483647),
				"spec.completionPolicy.type": "Always",
				"spec.failurePolicy.type":    "FailFast",
			},
		},
		{
			name: "SidecarSet update strategy",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: s}
spec:
  selector: {matchLabels: {app: a}}
  containers: [{name: log, image: busybox}]`,
			want: map[string]any{
				"spec.updateStrategy.type":           "RollingUpdate",
				"spec.updateStrategy.partition":      int64(0),
				"spec.updateStrategy.maxUnavailable": int64(1),
				"spec.revisionHistoryLimit":          int64(10),
			},
		},
		{
			name: "AdvancedCronJob history and concurrency",
			manifest: `
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata: {name: a, namespace: default}
spec:
  schedule: "*/5 * * * *"
  template:
    broadcastJobTemplate:
      spec:
        template: {spec: {restartPolicy: Never, containers: [{name: a, image: busybox}]}}`,
			want: map[string]any{
				"spec.concurrencyPolicy":          "Allow",
				"spec.paused":                     false,
				"spec.successfulJobsHistoryLimit": int64(3),
				"spec.failedJobsHistoryLimit":     int64(1),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal([]byte(tc.manifest), &obj.Object))
			errs := set.Validate(obj, nil) // defaults in place, then validates
			require.Empty(t, errs, "%v", errs.ToAggregate())
			for path, want := range tc.want {
				got, found, err := unstructured.NestedFieldNoCopy(obj.Object, strings.Split(path, ".")...)
				require.NoError(t, err, path)
				require.True(t, found, "%s not defaulted", path)
				require.Equal(t, want, got, path)
			}
		})
	}
}
