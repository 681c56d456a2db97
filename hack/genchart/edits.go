package main

import (
	"fmt"
	"regexp"
	"strings"
)

// edit replaces one line of a deploy/ file (and, for a block edit, the
// lines indented under it) with template text.
type edit struct {
	// file is the file under deploy/.
	file string
	// what names the edit in errors.
	what string
	// line is the whole line to find, indentation included.
	line string
	// block also replaces the lines indented under line (a mapping or
	// sequence value).
	block bool
	// with is the template text put in its place.
	with string
}

// edits are the values.yaml settings of the chart, each put where deploy/
// writes the value out. Their defaults in values.yaml are the values
// deploy/ has. The webhooks' failurePolicy and timeoutSeconds are edited
// by rule (webhookEdits), not listed here.
var edits = []edit{
	{file: "namespace.yaml", what: "namespace only when asked for", line: "apiVersion: v1",
		with: "{{- if .Values.createNamespace }}\napiVersion: v1"},

	{file: "coordinator.yaml", what: "coordinator replicas", line: "  replicas: 2",
		with: "  replicas: {{ .Values.coordinator.replicas }}"},
	{file: "coordinator.yaml", what: "coordinator priority class", line: "      serviceAccountName: shoal-coordinator",
		with: "      serviceAccountName: shoal-coordinator\n      {{- with .Values.coordinator.priorityClassName }}\n      priorityClassName: {{ . }}\n      {{- end }}"},
	{file: "coordinator.yaml", what: "coordinator image and flags", line: "        image: shoal-coordinator",
		with: "        image: {{ include \"shoal.image\" (list . \"shoal-coordinator\") }}\n        {{- include \"shoal.coordinator.args\" . | nindent 8 }}"},
	{file: "coordinator.yaml", what: "coordinator KruisePodReadinessGate (the component's env)", line: "        env:",
		with: "        env:\n        {{- if .Values.coordinator.kruisePodReadinessGate }}\n        - name: SHOAL_KRUISE_POD_READINESS_GATE\n          value: \"true\"\n        {{- end }}"},
	{file: "coordinator.yaml", what: "coordinator image pull policy", line: "        imagePullPolicy: IfNotPresent",
		with: "        imagePullPolicy: {{ .Values.images.pullPolicy }}"},
	{file: "coordinator.yaml", what: "coordinator resources", line: "        resources:", block: true,
		with: "        resources:\n          {{- toYaml .Values.coordinator.resources | nindent 10 }}"},

	{file: "agent.yaml", what: "agent priority class", line: "      priorityClassName: system-node-critical",
		with: "      {{- with .Values.agent.priorityClassName }}\n      priorityClassName: {{ . }}\n      {{- end }}"},
	{file: "agent.yaml", what: "agent tolerations and node selector", line: "      tolerations:", block: true,
		with: "      {{- with .Values.agent.tolerations }}\n      tolerations:\n        {{- toYaml . | nindent 6 }}\n      {{- end }}\n" +
			"      {{- with .Values.agent.nodeSelector }}\n      nodeSelector:\n        {{- toYaml . | nindent 8 }}\n      {{- end }}"},
	{file: "agent.yaml", what: "agent image and flags", line: "        image: shoal-agent",
		with: "        image: {{ include \"shoal.image\" (list . \"shoal-agent\") }}\n        {{- include \"shoal.agent.args\" . | nindent 8 }}"},
	{file: "agent.yaml", what: "agent image pull policy", line: "        imagePullPolicy: IfNotPresent",
		with: "        imagePullPolicy: {{ .Values.images.pullPolicy }}"},
	{file: "agent.yaml", what: "agent resources", line: "        resources:", block: true,
		with: "        resources:\n          {{- toYaml .Values.agent.resources | nindent 10 }}"},
}

var (
	webhookName    = regexp.MustCompile(`^- name: (\S+)$`)
	webhookSetting = regexp.MustCompile(`^  (failurePolicy|timeoutSeconds): (\S+)$`)
)

// webhookEdits puts each webhook's failurePolicy and timeoutSeconds
// under values.yaml's webhooks.failurePolicy and webhooks.timeoutSeconds,
// by webhook name, with deploy/'s value as the default.
func webhookEdits(src string) (string, error) {
	lines := strings.Split(src, "\n")
	name, n := "", 0
	for i, l := range lines {
		if m := webhookName.FindStringSubmatch(l); m != nil {
			name = m[1]
			continue
		}
		m := webhookSetting.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if name == "" {
			return "", fmt.Errorf("line %d: %s before any webhook name", i+1, m[1])
		}
		def := m[2]
		if m[1] == "failurePolicy" {
			def = fmt.Sprintf("%q", def)
		}
		lines[i] = fmt.Sprintf("  %s: {{ dig %q %q %s .Values.webhooks }}", m[1], m[1], name, def)
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("no failurePolicy or timeoutSeconds found")
	}
	return strings.Join(lines, "\n"), nil
}
