package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// ConvertPath is where the apps.kruise.io CRDs' conversion webhook points
// (deploy/crds/conversion-webhook.yaml).
const ConvertPath = "/convert"

// Converter converts one object to the apiVersion to.
type Converter func(obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error)

// HandleConversion serves apiextensions.k8s.io/v1 ConversionReviews on
// path with convert. Every object of a review is converted or none is:
// the first failure fails the review, with a message naming the object,
// and the apiserver fails the request that needed it.
func (s *Server) HandleConversion(path string, convert Converter) {
	s.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		result := "error"
		defer func() { s.duration.WithLabelValues(path, result).Observe(time.Since(start).Seconds()) }()
		log := klog.FromContext(r.Context()).WithValues("path", path)

		if r.Method != http.MethodPost {
			http.Error(w, "conversion reviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			http.Error(w, "conversion review unreadable or over 8 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		var review apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("body is not an apiextensions.k8s.io/v1 ConversionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		resp := convertAll(review.Request, convert)
		if resp.Result.Status == metav1.StatusSuccess {
			result = "converted"
		} else {
			log.Info("Conversion failed", "to", review.Request.DesiredAPIVersion, "err", resp.Result.Message)
		}
		review.Request, review.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&review); err != nil {
			log.Error(err, "Write conversion response")
		}
	}))
}

// convertAll converts every object of req.
func convertAll(req *apiextensionsv1.ConversionRequest, convert Converter) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	fail := func(err error) *apiextensionsv1.ConversionResponse {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
		return resp
	}
	for i, raw := range req.Objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			return fail(fmt.Errorf("object %d: %w", i, err))
		}
		out, err := convert(obj, req.DesiredAPIVersion)
		if err != nil {
			return fail(err)
		}
		data, err := out.MarshalJSON()
		if err != nil {
			return fail(fmt.Errorf("object %d: encode: %w", i, err))
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
	}
	return resp
}
