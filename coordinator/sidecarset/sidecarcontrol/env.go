package sidecarcontrol

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// subPathExprVar finds the $(VAR) references in a volumeMount's
// subPathExpr.
var subPathExprVar = regexp.MustCompile(`\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`)

// transferEnvs returns the variables sc's transferEnv copies from the
// pod's containers. Entries whose source container cannot be named, and
// variables the source does not have, are skipped (as in OpenKruise).
func transferEnvs(sc *appsv1beta1.SidecarContainer, pod *corev1.Pod) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, t := range sc.TransferEnv {
		source := t.SourceContainerName
		if t.SourceContainerNameFrom != nil && t.SourceContainerNameFrom.FieldRef != nil {
			name, err := containerNameFromField(t.SourceContainerNameFrom.FieldRef, pod)
			if err != nil {
				continue
			}
			source = name
		}
		var c *corev1.Container
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == source {
				c = &pod.Spec.Containers[i]
				break
			}
		}
		if c == nil || source == "" {
			continue
		}
		names := slices.Clone(t.EnvNames)
		if t.EnvName != "" {
			names = append(names, t.EnvName)
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			if e := findEnv(c.Env, name); e != nil {
				out = append(out, *e)
			}
		}
	}
	return out
}

// containerNameFromField reads a container name from the pod field fs
// selects: metadata.name, metadata.labels['<key>'] or
// metadata.annotations['<key>'].
func containerNameFromField(fs *corev1.ObjectFieldSelector, pod *corev1.Pod) (string, error) {
	path := fs.FieldPath
	if path == "metadata.name" {
		return pod.Name, nil
	}
	open := strings.Index(path, "[")
	if open < 0 || !strings.HasSuffix(path, "']") || len(path) < open+4 || path[open+1] != '\'' {
		return "", fmt.Errorf("unsupported fieldPath %q", path)
	}
	field, key := path[:open], path[open+2:len(path)-2]
	switch field {
	case "metadata.labels":
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return "", fmt.Errorf("fieldPath %q: invalid key: %s", path, strings.Join(errs, "; "))
		}
		return pod.Labels[key], nil
	case "metadata.annotations":
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
			return "", fmt.Errorf("fieldPath %q: invalid key: %s", path, strings.Join(errs, "; "))
		}
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// findEnv returns the variable called name in env, or nil.
func findEnv(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

// setEnv sets v in env, replacing a variable of the same name.
func setEnv(env []corev1.EnvVar, v corev1.EnvVar) []corev1.EnvVar {
	if e := findEnv(env, v.Name); e != nil {
		*e = v
		return env
	}
	return append(env, v)
}

// mergeEnv appends the variables of extra that env does not have by name;
// env's own win.
func mergeEnv(env, extra []corev1.EnvVar) []corev1.EnvVar {
	for _, v := range extra {
		if findEnv(env, v.Name) == nil {
			env = append(env, v)
		}
	}
	return env
}
