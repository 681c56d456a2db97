// Package crdvalidation validates custom resources against Shoal's generated
// CRD manifests in process, with the same code the kube-apiserver runs for a
// create or update: defaulting, pruning (reported as an error here instead
// of silently dropping fields), OpenAPI schema validation, embedded
// ObjectMeta and list-type checks, and CEL rules including transition rules.
//
// Tests use it to prove that manifests written for OpenKruise apply
// unchanged, and that bad input is rejected with a message naming the field.
package crdvalidation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Set holds the validators of every served version of a set of CRDs.
type Set struct {
	// CRDs are the definitions as read from disk, by file name.
	CRDs     map[string]*apiextensionsv1.CustomResourceDefinition
	versions map[schema.GroupVersionKind]*version
}

// version is everything needed to validate objects of one served version.
type version struct {
	namespaced bool
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// LoadDir reads every *.yaml CRD in dir and prepares its validators. A CRD
// the apiserver would refuse to create is an error.
func LoadDir(dir string) (*Set, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list CRDs in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD manifests in %s (run: make generate)", dir)
	}
	set := &Set{
		CRDs:     map[string]*apiextensionsv1.CustomResourceDefinition{},
		versions: map[schema.GroupVersionKind]*version{},
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRD: %w", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decode CRD %s: %w", f, err)
		}
		if err := set.add(crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", filepath.Base(f), err)
		}
		set.CRDs[filepath.Base(f)] = crd
	}
	return set, nil
}

// Internal converts a v1 CRD to the apiserver's internal form.
func Internal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		return nil, fmt.Errorf("convert to internal: %w", err)
	}
	return internal, nil
}

// ValidateDefinition runs the kube-apiserver's own validation of a CRD on
// create: structural schema rules, CEL compilation and cost budget,
// defaults, printer columns, subresources.
func ValidateDefinition(crd *apiextensionsv1.CustomResourceDefinition) error {
	// The apiserver records the storage version before it validates a new CRD.
	crd = crd.DeepCopy()
	crd.Status.StoredVersions = nil
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		}
	}
	internal, err := Internal(crd)
	if err != nil {
		return err
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal).ToAggregate()
}

func (s *Set) add(crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := ValidateDefinition(crd); err != nil {
		return fmt.Errorf("the apiserver would reject this CRD: %w", err)
	}
	internal, err := Internal(crd)
	if err != nil {
		return err
	}
	for _, v := range internal.Spec.Versions {
		// The internal form keeps a schema shared by all versions (always so
		// for a single-version CRD) in spec.validation.
		validation := v.Schema
		if validation == nil {
			validation = internal.Spec.Validation
		}
		if !v.Served || validation == nil {
			continue
		}
		structural, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("version %s: structural schema: %w", v.Name, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("version %s: schema validator: %w", v.Name, err)
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		s.versions[gvk] = &version{
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			structural: structural,
			schema:     validator,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}
	}
	return nil
}

// Kinds lists the kinds of the set, each once, sorted.
func (s *Set) Kinds() []string {
	seen := map[string]bool{}
	for gvk := range s.versions {
		seen[gvk.Kind] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Has reports whether the set serves gvk.
func (s *Set) Has(gvk schema.GroupVersionKind) bool {
	_, ok := s.versions[gvk]
	return ok
}

// Validate checks obj as the apiserver would on create (old == nil) or
// update. obj is defaulted in place, as the apiserver does before
// validation. Fields the schema does not know are reported as errors rather
// than pruned: a manifest that loses data on apply is a defect.
func (s *Set) Validate(obj, old *unstructured.Unstructured) field.ErrorList {
	gvk := obj.GroupVersionKind()
	v, ok := s.versions[gvk]
	if !ok {
		return field.ErrorList{field.NotSupported[string](field.NewPath("kind"), gvk.String(), nil)}
	}
	var errs field.ErrorList

	defaulting.Default(obj.Object, v.structural)
	pruned := pruning.PruneWithOptions(obj.DeepCopy().Object, v.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range pruned {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: the schema has no such field; check its spelling and nesting"))
	}

	errs = append(errs, metavalidation.ValidateObjectMetaAccessor(obj, v.namespaced,
		metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, v.schema)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj.Object, old.Object, v.schema)...)
	}
	errs = append(errs, schemaobjectmeta.Validate(nil, obj.Object, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj.Object)...)

	var oldObj any
	if old != nil {
		defaulting.Default(old.Object, v.structural)
		oldObj = old.Object
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj.Object, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// Schema returns the structural schema of a served version, or nil.
func (s *Set) Schema(gvk schema.GroupVersionKind) *structuralschema.Structural {
	if v, ok := s.versions[gvk]; ok {
		return v.structural
	}
	return nil
}

// ReadManifests splits a multi-document YAML file into objects, skipping
// empty documents.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		// Through JSON, so that numbers decode as int64/float64 the way the
		// apiserver sees them (CEL tells int from double).
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		obj := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if obj.Object == nil {
			continue
		}
		objs = append(objs, obj)
	}
}

// Walk calls visit for every node of a schema, the root first (path ""),
// then each property ("spec.replicas"), array item ("spec.containers[]")
// and map value ("spec.labels{}"), in a stable order.
func Walk(props *apiextensionsv1.JSONSchemaProps, visit func(path string, p *apiextensionsv1.JSONSchemaProps)) {
	var walk func(path string, p *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, p *apiextensionsv1.JSONSchemaProps) {
		visit(path, p)
		names := make([]string, 0, len(p.Properties))
		for n := range p.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			child := p.Properties[n]
			walk(strings.TrimPrefix(path+"."+n, "."), &child)
		}
		if p.Items != nil && p.Items.Schema != nil {
			walk(path+"[]", p.Items.Schema)
		}
		if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
			walk(path+"{}", p.AdditionalProperties.Schema)
		}
	}
	walk("", props)
}

// Undescribed calls undescribed with the path of every property of a CRD
// version's schema whose description is empty. The root's apiVersion, kind
// and metadata are standard and skipped; array items and map values are
// described by their parent property.
func Undescribed(props *apiextensionsv1.JSONSchemaProps, undescribed func(path string)) {
	Walk(props, func(path string, p *apiextensionsv1.JSONSchemaProps) {
		switch {
		case path == "", path == "apiVersion", path == "kind", path == "metadata",
			strings.HasSuffix(path, "[]"), strings.HasSuffix(path, "{}"):
		case strings.TrimSpace(p.Description) == "":
			undescribed(path)
		}
	})
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
