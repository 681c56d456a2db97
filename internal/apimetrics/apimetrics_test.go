package apimetrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods":                                      "pods",
		"/api/v1/namespaces/ns/pods/web-1":                                "pods",
		"/api/v1/namespaces/ns/pods/web-1/status":                         "pods/status",
		"/apis/apps.kruise.io/v1beta1/namespaces/ns/clonesets/web/status": "clonesets.apps.kruise.io/status",
		"/apis/apps/v1/namespaces/ns/controllerrevisions":                 "controllerrevisions.apps",
		"/api/v1/nodes/n1":                                                "nodes",
		"/api/v1/namespaces/ns":                                           "namespaces",
		"/apis":                                                           "other",
		"/healthz":                                                        "other",
	} {
		require.Equal(t, want, Resource(path), path)
	}
}

func TestInstrumentCountsRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"ns"}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c, err := New("test", reg)
	require.NoError(t, err)
	cfg := &rest.Config{Host: srv.URL}
	c.Instrument(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = client.CoreV1().Pods("ns").Get(t.Context(), "web-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Pods("ns").Delete(t.Context(), "web-1", metav1.DeleteOptions{}))
	require.Equal(t, 1.0, testutil.ToFloat64(c.requests.WithLabelValues("GET", "pods", "200")))
	require.Equal(t, 1.0, testutil.ToFloat64(c.requests.WithLabelValues("DELETE", "pods", "200")))
}
