package kubeclient

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestProtobufNegotiates: a clientset on the returned config asks for
// protobuf and decodes the protobuf answer, and the original config is
// left as it was.
func TestProtobufNegotiates(t *testing.T) {
	want := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
	}
	var body bytes.Buffer
	require.NoError(t, protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(want, &body))
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(body.Bytes())
	}))
	defer srv.Close()

	base := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(Protobuf(base))
	require.NoError(t, err)
	got, err := client.CoreV1().Pods("ns").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, accept)
	require.Equal(t, want.Name, got.Name)
	require.Equal(t, want.Labels, got.Labels)
	require.Equal(t, want.Spec.NodeName, got.Spec.NodeName)
	require.Empty(t, base.ContentType, "the original config is not changed")
	require.Empty(t, base.AcceptContentTypes)
}
