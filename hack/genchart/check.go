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
// CRDs' helm.sh/resource-policy annotation. withGate, when not "", is the
// chart rendered with coordinator.kruisePodReadinessGate=true, compared
// with deploy/ plus the kruise-pod-readiness-gate component.
func check(rendered, withGate string) error {
	deploy, err := deployObjects()
	if err != nil {
		return err
	}
	if err := compare(rendered, deploy, "with its default values"); err != nil {
		return err
	}
	fmt.Printf("genchart: the chart renders deploy/'s %d objects\n", len(deploy))
	if withGate == "" {
		return nil
	}
	if err := addReadinessGate(deploy); err != nil {
		return err
	}
	if err := compare(withGate, deploy, "with coordinator.kruisePodReadinessGate=true"); err != nil {
		return err
	}
	fmt.Printf("genchart: with coordinator.kruisePodReadinessGate=true it renders deploy/ with deploy/%s\n", readinessGateComponent)
	return nil
}

// deployObjects are the objects of deploy/kustomization.yaml's resources
// as kustomize builds them (with its part-of label), the Namespace left
// out.
func deployObjects() (map[string]map[string]any, error) {
	files, err := resources()
	if err != nil {
		return nil, err
	}
	deploy := map[string]map[string]any{}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			return nil, fmt.Errorf("read deploy/%s: %w", f, err)
		}
		objs, err := objects(src)
		if err != nil {
			return nil, fmt.Errorf("deploy/%s: %w", f, err)
		}
		maps.Copy(deploy, objs)
	}
	for k, o := range deploy {
		if o["kind"] == "Namespace" {
			delete(deploy, k)
			continue
		}
		// As deploy/kustomization.yaml's labels do.
		md, _ := o["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
			md["labels"] = labels
		}
		labels["app.kubernetes.io/part-of"] = "shoal"
	}
	return deploy, nil
}

// addReadinessGate applies the kruise-pod-readiness-gate component to
// deploy: its webhook, and its environment variable on the coordinator
// (first, where the chart puts it; the order of env has no meaning).
func addReadinessGate(deploy map[string]map[string]any) error {
	f := readinessGateComponent + "/webhook.yaml"
	src, err := os.ReadFile(filepath.Join(deployDir, f))
	if err != nil {
		return fmt.Errorf("read deploy/%s: %w", f, err)
	}
	objs, err := objects(src)
	if err != nil {
		return fmt.Errorf("deploy/%s: %w", f, err)
	}
	maps.Copy(deploy, objs)
	d, ok := deploy["Deployment shoal-system/shoal-coordinator"]
	if !ok {
		return fmt.Errorf("deploy/ has no Deployment shoal-system/shoal-coordinator")
	}
	spec, _ := d["spec"].(map[string]any)
	tpl, _ := spec["template"].(map[string]any)
	podSpec, _ := tpl["spec"].(map[string]any)
	containers, _ := podSpec["containers"].([]any)
	for _, c := range containers {
		c, _ := c.(map[string]any)
		if c["name"] != "coordinator" {
			continue
		}
		env, _ := c["env"].([]any)
		c["env"] = append([]any{map[string]any{"name": "SHOAL_KRUISE_POD_READINESS_GATE", "value": "true"}}, env...)
		return nil
	}
	return fmt.Errorf("the coordinator Deployment has no container named coordinator")
}

// compare checks that the chart rendered in file renders exactly want.
func compare(file string, want map[string]map[string]any, how string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the rendered chart: %w", err)
	}
	chart, err := objects(b)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
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
	for _, k := range slices.Sorted(maps.Keys(want)) {
		c, ok := chart[k]
		switch {
		case !ok:
			problems = append(problems, k+": in deploy/, not rendered by the chart")
		case !reflect.DeepEqual(want[k], c):
			problems = append(problems, fmt.Sprintf("%s differs:\n  deploy/: %s\n  chart:   %s", k, brief(want[k]), brief(c)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(chart)) {
		if _, ok := want[k]; !ok {
			problems = append(problems, k+": rendered by the chart, not in deploy/")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the chart %s does not render deploy/ (run make generate, or fix values.yaml):\n%s", how, strings.Join(problems, "\n"))
	}
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
