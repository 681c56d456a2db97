package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// check compares rendered (the chart rendered with its default values)
// with deploy/'s objects: the same objects, field for field. The
// differences allowed are the Namespace, which the chart leaves to
// `helm install --create-namespace` unless createNamespace is set, and the
// CRDs' helm.sh/resource-policy annotation.
func check(rendered string) error {
	b, err := os.ReadFile(rendered)
	if err != nil {
		return fmt.Errorf("read the rendered chart: %w", err)
	}
	chart, err := objects(b)
	if err != nil {
		return fmt.Errorf("%s: %w", rendered, err)
	}
	files, err := resources()
	if err != nil {
		return err
	}
	deploy := map[string]map[string]any{}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			return fmt.Errorf("read deploy/%s: %w", f, err)
		}
		objs, err := objects(src)
		if err != nil {
			return fmt.Errorf("deploy/%s: %w", f, err)
		}
		maps.Copy(deploy, objs)
	}
	for k, o := range deploy {
		if o["kind"] == "Namespace" {
			delete(deploy, k)
		}
	}
	for _, o := range chart {
		if md, ok := o["metadata"].(map[string]any); ok {
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, "helm.sh/resource-policy")
				if len(ann) == 0 {
					delete(md, "annotations")
				}
			}
		}
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(deploy)) {
		c, ok := chart[k]
		switch {
		case !ok:
			problems = append(problems, k+": in deploy/, not rendered by the chart")
		case !reflect.DeepEqual(deploy[k], c):
			problems = append(problems, fmt.Sprintf("%s differs:\n  deploy/: %s\n  chart:   %s", k, brief(deploy[k]), brief(c)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(chart)) {
		if _, ok := deploy[k]; !ok {
			problems = append(problems, k+": rendered by the chart, not in deploy/")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the chart with its default values does not render deploy/ (run make generate, or fix values.yaml):\n%s", strings.Join(problems, "\n"))
	}
	fmt.Printf("genchart: the chart renders deploy/'s %d objects\n", len(deploy))
	return nil
}

// objects parses a multi-document YAML stream into objects by
// "kind namespace/name"; comment-only documents are skipped.
func objects(stream []byte) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for i, doc := range bytes.Split(stream, []byte("\n---")) {
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(o) == 0 {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		key := fmt.Sprintf("%v %v/%v", o["kind"], md["namespace"], md["name"])
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s twice", key)
		}
		out[key] = o
	}
	return out, nil
}

// brief renders an object as JSON, cut to a readable length.
func brief(o map[string]any) string {
	b, _ := json.Marshal(o)
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
