package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func request(kind, obj string) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID: "u1", Kind: metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: kind},
		Name: "demo", Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(obj)},
	}
}

func TestValidateSelectors(t *testing.T) {
	for _, tc := range []struct {
		name, kind, obj string
		want            []string // substrings of the denial; nil = allowed
	}{
		{"valid CloneSet", "CloneSet", `{"spec":{"selector":{"matchLabels":{"app":"web"}}}}`, nil},
		{"bad label value", "CloneSet", `{"spec":{"selector":{"matchLabels":{"app":"not valid!"}}}}`,
			[]string{`CloneSet "demo" is invalid`, "spec.selector.matchLabels", "not valid!"}},
		{"In without values", "PodProbeMarker", `{"spec":{"selector":{"matchExpressions":[{"key":"app","operator":"In"}]}}}`,
			[]string{"spec.selector.matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'"}},
		{"unknown operator", "SidecarSet", `{"spec":{"namespaceSelector":{"matchExpressions":[{"key":"a","operator":"Like","values":["x"]}]}}}`,
			[]string{"spec.namespaceSelector.matchExpressions[0].operator", `"Like"`}},
		{"nested affinity selector", "CloneSet", `{"spec":{"template":{"spec":{"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"x","labelSelector":{"matchLabels":{"bad key!":"v"}}}]}}}}}}`,
			[]string{"spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels"}},
		{"ImagePullJob names are not labels", "ImagePullJob", `{"spec":{"selector":{"names":["node-1"],"matchLabels":{"zone":"a"}}}}`, nil},
		{"nodeSelector map is not a label selector", "CloneSet", `{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"linux"}}}}}`, nil},
		{"no spec", "CloneSet", `{"metadata":{}}`, nil},
		{"node selector terms are not label selectors", "WorkloadSpread",
			`{"spec":{"subsets":[{"name":"a","requiredNodeSelector":{"matchExpressions":[{"key":"cpu","operator":"Gt","values":["4"]}]}}]}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ValidateSelectors(context.Background(), request(tc.kind, tc.obj))
			if tc.want == nil {
				require.Nil(t, resp)
				return
			}
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			require.EqualValues(t, http.StatusUnprocessableEntity, resp.Result.Code)
			for _, w := range tc.want {
				require.Contains(t, resp.Result.Message, w)
			}
		})
	}
}

func TestServerRoundTrip(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewServer(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }, reg)
	s.Handle(SelectorsPath, ValidateSelectors)
	srv := httptest.NewServer(s.mux)
	defer srv.Close()

	post := func(body []byte) *http.Response {
		resp, err := http.Post(srv.URL+SelectorsPath, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		return resp
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  request("CloneSet", `{"spec":{"selector":{"matchLabels":{"app":"not valid!"}}}}`),
	})
	require.NoError(t, err)
	resp := post(review)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "u1", string(out.Response.UID))
	require.False(t, out.Response.Allowed)
	require.Equal(t, 1, testutil.CollectAndCount(s.duration, "shoal_coordinator_webhook_duration_seconds"))

	bad := post([]byte("not json"))
	defer func() { _ = bad.Body.Close() }()
	require.Equal(t, http.StatusBadRequest, bad.StatusCode)
}
