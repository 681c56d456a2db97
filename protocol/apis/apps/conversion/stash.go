package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StashAnnotationPrefix starts the annotation that carries, on an object
// converted from version V, the fields of V the object's own version has no
// place for: StashAnnotationPrefix + V (for example
// "conversion.shoal.io/v1beta1" on a v1alpha1 object converted from
// v1beta1).
const StashAnnotationPrefix = "conversion.shoal.io/"

// Stash records fields, a struct of the source version's fields that the
// target version cannot hold, in obj's annotation for version from. A zero
// fields (nothing to keep) writes nothing, so objects that use no such
// field convert without an annotation.
func Stash(obj metav1.Object, from string, fields any) error {
	if reflect.ValueOf(fields).Elem().IsZero() {
		return nil
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("stash %s fields of %s: %w", from, obj.GetName(), err)
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[StashAnnotationPrefix+from] = string(raw)
	obj.SetAnnotations(a)
	return nil
}

// Unstash reads the fields Stash recorded for version to back into fields
// (a pointer to the same struct) and removes the annotation from obj. It
// reports whether there was one. An annotation that does not parse is an
// error that names it: the object was edited by hand.
func Unstash(obj metav1.Object, to string, fields any) (bool, error) {
	key := StashAnnotationPrefix + to
	a := obj.GetAnnotations()
	raw, ok := a[key]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal([]byte(raw), fields); err != nil {
		return false, fmt.Errorf("annotation %s of %s: %w (remove it or restore its JSON)", key, obj.GetName(), err)
	}
	delete(a, key)
	if len(a) == 0 {
		a = nil
	}
	obj.SetAnnotations(a)
	return true, nil
}

// copyMeta returns a deep copy of in's ObjectMeta, so that stashing into
// the converted object never changes the source's annotations.
func copyMeta(in *metav1.ObjectMeta) metav1.ObjectMeta {
	return *in.DeepCopy()
}
