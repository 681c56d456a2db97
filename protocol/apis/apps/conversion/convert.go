package conversion

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// Versions of the group that conversions go between.
var (
	// Alpha is apps.kruise.io/v1alpha1.
	Alpha = v1alpha1.SchemeGroupVersion
	// Beta is apps.kruise.io/v1beta1.
	Beta = v1beta1.SchemeGroupVersion
)

// kindConversion is how one kind converts.
type kindConversion struct {
	// up converts a v1alpha1 object (JSON) to v1beta1 (JSON); down the
	// other way.
	up, down func([]byte) ([]byte, error)
}

// kinds are the registered conversions by kind.
var kinds = map[string]kindConversion{}

// register adds a kind's conversion: up from v1alpha1 type A to v1beta1
// type B, and down back. Each kind's file calls it from init.
func register[A, B any](kind string, up func(*A, *B) error, down func(*B, *A) error) {
	if _, dup := kinds[kind]; dup {
		panic("conversion: kind " + kind + " registered twice")
	}
	kinds[kind] = kindConversion{up: viaJSON(up), down: viaJSON(down)}
}

// viaJSON lifts a typed conversion to JSON in and out.
func viaJSON[S, D any](f func(*S, *D) error) func([]byte) ([]byte, error) {
	return func(raw []byte) ([]byte, error) {
		var in S
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		var out D
		if err := f(&in, &out); err != nil {
			return nil, err
		}
		return json.Marshal(&out)
	}
}

// Kinds lists the kinds that convert, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Convert returns obj at apiVersion to (apps.kruise.io/v1alpha1 or
// v1beta1). An object already at that version is returned as it is (a
// copy). The kind must be one of Kinds.
func Convert(obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
	from := obj.GetAPIVersion()
	kind := obj.GetKind()
	if from == to {
		return obj.DeepCopy(), nil
	}
	c, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("convert %s %s: no conversion for kind %s", kind, obj.GetName(), kind)
	}
	var f func([]byte) ([]byte, error)
	switch {
	case from == Alpha.String() && to == Beta.String():
		f = c.up
	case from == Beta.String() && to == Alpha.String():
		f = c.down
	default:
		return nil, fmt.Errorf("convert %s %s from %s to %s: only %s and %s convert", kind, obj.GetName(), from, to, Alpha, Beta)
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: encode: %w", kind, obj.GetName(), err)
	}
	out, err := f(raw)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s from %s to %s: %w", kind, obj.GetName(), from, to, err)
	}
	// Not res.UnmarshalJSON: it wants a kind, and conversions leave
	// TypeMeta to this function.
	res := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(out, &res.Object); err != nil {
		return nil, fmt.Errorf("convert %s %s: decode the result: %w", kind, obj.GetName(), err)
	}
	gv, _ := schema.ParseGroupVersion(to)
	res.SetGroupVersionKind(gv.WithKind(kind))
	return res, nil
}

// CRDNames are the names of the CRDs of Kinds (every apps.kruise.io
// plural is the lowercase kind plus "s").
func CRDNames() []string {
	out := make([]string, 0, len(kinds))
	for _, k := range Kinds() {
		out = append(out, strings.ToLower(k)+"s."+Alpha.Group)
	}
	return out
}
