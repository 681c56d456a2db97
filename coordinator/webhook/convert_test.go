package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// relabel is a converter that only sets the apiVersion, and fails on
// objects named "bad".
func relabel(obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
	if obj.GetName() == "bad" {
		return nil, errors.New("convert CloneSet bad: no")
	}
	out := obj.DeepCopy()
	out.SetAPIVersion(to)
	return out, nil
}

func conversionServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := NewServer(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }, prometheus.NewRegistry())
	s.HandleConversion(ConvertPath, relabel)
	srv := httptest.NewServer(s.mux)
	t.Cleanup(srv.Close)
	return srv
}

func object(name string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","metadata":{"name":"` + name + `"}}`)}
}

func TestHandleConversion(t *testing.T) {
	srv := conversionServer(t)
	tests := []struct {
		name    string
		objects []runtime.RawExtension
		status  string
		message string
	}{
		{"every object converted", []runtime.RawExtension{object("a"), object("b")}, metav1.StatusSuccess, ""},
		{"one failure fails the review", []runtime.RawExtension{object("a"), object("bad")}, metav1.StatusFailure, "convert CloneSet bad: no"},
		{"an object without a kind", []runtime.RawExtension{{Raw: []byte(`{"metadata":{"name":"x"}}`)}}, metav1.StatusFailure, "object 0:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			review := apiextensionsv1.ConversionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
				Request:  &apiextensionsv1.ConversionRequest{UID: "u-1", DesiredAPIVersion: "apps.kruise.io/v1beta1", Objects: tc.objects},
			}
			body, err := json.Marshal(&review)
			require.NoError(t, err)
			resp, err := http.Post(srv.URL+ConvertPath, "application/json", bytes.NewReader(body))
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var got apiextensionsv1.ConversionReview
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
			require.Nil(t, got.Request)
			require.NotNil(t, got.Response)
			require.EqualValues(t, "u-1", got.Response.UID)
			require.Equal(t, tc.status, got.Response.Result.Status)
			require.Contains(t, got.Response.Result.Message, tc.message)
			if tc.status != metav1.StatusSuccess {
				require.Empty(t, got.Response.ConvertedObjects)
				return
			}
			require.Len(t, got.Response.ConvertedObjects, len(tc.objects))
			for _, raw := range got.Response.ConvertedObjects {
				u := &unstructured.Unstructured{}
				require.NoError(t, u.UnmarshalJSON(raw.Raw))
				require.Equal(t, "apps.kruise.io/v1beta1", u.GetAPIVersion())
			}
		})
	}
}

func TestHandleConversionBadRequests(t *testing.T) {
	srv := conversionServer(t)
	resp, err := http.Get(srv.URL + ConvertPath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	resp, err = http.Post(srv.URL+ConvertPath, "application/json", bytes.NewReader([]byte(`{"kind":"ConversionReview"}`)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a review without a request")
}
