package framework

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// RESTMapping maps gvk to its resource and scope. A kind the cached
// discovery data does not know (a CRD installed since) triggers one
// refresh of the data before giving up.
func (c *Clients) RESTMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.Mapper.Reset()
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("map %s to a resource: %w", gvk, err)
	}
	return m, nil
}

// ResourceFor returns the dynamic client of obj's resource, in obj's
// namespace when the resource is namespaced.
func (c *Clients) ResourceFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	m, err := c.RESTMapping(obj.GroupVersionKind())
	if err != nil {
		return nil, nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), m, nil
	}
	return c.Dynamic.Resource(m.Resource), m, nil
}

// ApplyDryRun creates obj on the server with dryRun=All: the apiserver runs
// defaulting, schema and CEL validation and admission (webhooks included)
// but stores nothing. Unknown fields are rejected (fieldValidation=Strict,
// as kubectl does by default).
func (c *Clients) ApplyDryRun(ctx context.Context, obj *unstructured.Unstructured) error {
	res, _, err := c.ResourceFor(obj)
	if err != nil {
		return err
	}
	_, err = res.Create(ctx, obj, metav1.CreateOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return fmt.Errorf("dry-run create %s %s: %w", obj.GetKind(), objectKey(obj), err)
	}
	return nil
}

// ServesGroupVersion reports whether the apiserver serves groupVersion
// (e.g. "apps.kruise.io/v1alpha1").
func (c *Clients) ServesGroupVersion(groupVersion string) (bool, error) {
	_, err := c.Kube.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("discover %s: %w", groupVersion, err)
}

func objectKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
