package rbacdoc_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"
)

// Paths relative to this package's directory, the working directory of
// its tests.
const (
	manifestPath = "../../deploy/rbac.yaml"
	docPath      = "../../docs/dev/rbac.md"
)

// The agent's ServiceAccount, which no binding may name.
const (
	agentNamespace      = "shoal-system"
	agentServiceAccount = "shoal-agent"
)

// docColumns are the columns of every role table in docs/dev/rbac.md.
var docColumns = []string{"API group", "resources", "verbs", "why (who uses it)"}

// nonResourceGroup is what the API group column says for a rule of
// nonResourceURLs.
const nonResourceGroup = "(non-resource)"

// fixHint ends every failure message.
const fixHint = "update docs/dev/rbac.md to match deploy/rbac.yaml: one table per Role and ClusterRole, " +
	"under a heading naming it, with one row per rule in manifest order, resources and verbs as in the manifest, " +
	"a reason in the why column, and any resourceNames after \"only:\" at its end"

// role is a Role or ClusterRole of the manifest.
type role struct {
	Kind, Namespace, Name string
	Rules                 []rbacv1.PolicyRule
}

// String names the role as the doc's headings do.
func (r role) String() string {
	if r.Namespace != "" {
		return fmt.Sprintf("%s %s (namespace %s)", r.Kind, r.Name, r.Namespace)
	}
	return r.Kind + " " + r.Name
}

// manifest is what the checks read from deploy/rbac.yaml.
type manifest struct {
	// Roles are the Roles and ClusterRoles in manifest order.
	Roles               []role
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	// ServiceAccounts are "namespace/name".
	ServiceAccounts []string
}

// parseManifest reads a multi-document YAML manifest. Documents of other
// kinds, and documents that hold only comments, are skipped.
func parseManifest(data []byte) (*manifest, error) {
	m := &manifest{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		switch tm.Kind {
		case "":
			if len(bytes.TrimSpace(stripComments(doc))) > 0 {
				return nil, fmt.Errorf("document %d has no kind", n)
			}
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(doc, &cr); err != nil {
				return nil, fmt.Errorf("document %d (ClusterRole): %w", n, err)
			}
			m.Roles = append(m.Roles, role{Kind: tm.Kind, Name: cr.Name, Rules: cr.Rules})
		case "Role":
			var ro rbacv1.Role
			if err := yaml.UnmarshalStrict(doc, &ro); err != nil {
				return nil, fmt.Errorf("document %d (Role): %w", n, err)
			}
			m.Roles = append(m.Roles, role{Kind: tm.Kind, Namespace: ro.Namespace, Name: ro.Name, Rules: ro.Rules})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				return nil, fmt.Errorf("document %d (RoleBinding): %w", n, err)
			}
			m.RoleBindings = append(m.RoleBindings, b)
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				return nil, fmt.Errorf("document %d (ClusterRoleBinding): %w", n, err)
			}
			m.ClusterRoleBindings = append(m.ClusterRoleBindings, b)
		case "ServiceAccount":
			var sa metav1.PartialObjectMetadata
			if err := yaml.Unmarshal(doc, &sa); err != nil {
				return nil, fmt.Errorf("document %d (ServiceAccount): %w", n, err)
			}
			m.ServiceAccounts = append(m.ServiceAccounts, sa.Namespace+"/"+sa.Name)
		}
	}
}

// stripComments drops the YAML comment lines of doc.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// row is one data row of a role table.
type row struct {
	Line        int // 1-based line in the doc
	NonResource bool
	Groups      []string // "" is the core group
	Resources   []string // or the nonResourceURLs
	Verbs       []string
	Why         string   // the reason, without the "only:" list
	Only        []string // the resourceNames listed after "only:"
}

// table is the table under one heading of the doc.
type table struct {
	Heading string
	Line    int // of the heading
	Rows    []row
}

// doc is what the checks read from docs/dev/rbac.md: its headings in
// order, each with the first table under it (nil when it has none).
type doc struct {
	Sections []*section
}

// section is a heading and the table under it.
type section struct {
	Heading string
	Line    int
	Table   *table
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpanRE = regexp.MustCompile("`([^`]*)`")
	separator  = regexp.MustCompile(`^\s*:?-+:?\s*$`)
	onlyRE     = regexp.MustCompile(`(?i)\bonly:`)
)

// parseDoc reads the headings and tables of a markdown document. Lines in
// fenced code blocks are skipped.
func parseDoc(md string) (*doc, error) {
	d := &doc{}
	var cur *section
	var tableLines []string
	var tableStart int
	fenced := false
	flush := func() error {
		if tableLines == nil {
			return nil
		}
		defer func() { tableLines = nil }()
		if cur == nil {
			return fmt.Errorf("line %d: a table before the first heading", tableStart)
		}
		if cur.Table != nil {
			return fmt.Errorf("line %d: a second table under heading %q (line %d)", tableStart, cur.Heading, cur.Line)
		}
		t, err := parseTable(tableLines, tableStart)
		if err != nil {
			return fmt.Errorf("table under heading %q: %w", cur.Heading, err)
		}
		t.Heading, t.Line = cur.Heading, cur.Line
		cur.Table = t
		return nil
	}
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(trimmed, "|") {
			if tableLines == nil {
				tableStart = n
			}
			tableLines = append(tableLines, trimmed)
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			cur = &section{Heading: m[1], Line: n}
			d.Sections = append(d.Sections, cur)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return d, nil
}

// parseTable reads a role table: the header, the separator and the rows.
func parseTable(lines []string, start int) (*table, error) {
	if len(lines) < 2 {
		return nil, fmt.Errorf("line %d: a table needs a header and a separator row", start)
	}
	header := splitRow(lines[0])
	if !slices.Equal(header, docColumns) {
		return nil, fmt.Errorf("line %d: columns %q, want %q", start, header, docColumns)
	}
	for _, c := range splitRow(lines[1]) {
		if !separator.MatchString(c) {
			return nil, fmt.Errorf("line %d: not a separator row: %s", start+1, lines[1])
		}
	}
	t := &table{}
	for i, line := range lines[2:] {
		n := start + 2 + i
		cells := splitRow(line)
		if len(cells) != len(docColumns) {
			return nil, fmt.Errorf("line %d: %d cells, want %d (%s)", n, len(cells), len(docColumns), strings.Join(docColumns, " | "))
		}
		r := row{Line: n}
		var err error
		if cells[0] == nonResourceGroup {
			r.NonResource = true
		} else if r.Groups, err = codeList(cells[0]); err != nil {
			return nil, fmt.Errorf("line %d, API group column: %w (or %s for nonResourceURLs)", n, err, nonResourceGroup)
		}
		for i := range r.Groups {
			if r.Groups[i] == `""` {
				r.Groups[i] = ""
			}
		}
		if r.Resources, err = codeList(cells[1]); err != nil {
			return nil, fmt.Errorf("line %d, resources column: %w", n, err)
		}
		if r.Verbs, err = codeList(cells[2]); err != nil {
			return nil, fmt.Errorf("line %d, verbs column: %w", n, err)
		}
		r.Why, r.Only = splitWhy(cells[3])
		t.Rows = append(t.Rows, r)
	}
	return t, nil
}

// splitRow splits a table row into its trimmed cells. A | inside a code
// span or escaped as \| does not split.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	var cell strings.Builder
	inCode := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
			continue
		case c == '`':
			inCode = !inCode
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteByte(c)
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// codeList reads a cell that is a comma-separated list of code spans.
func codeList(cell string) ([]string, error) {
	spans := codeSpanRE.FindAllStringSubmatch(cell, -1)
	between := codeSpanRE.ReplaceAllString(cell, "")
	if len(spans) == 0 || strings.Trim(between, " ,") != "" || strings.Count(between, ",") != len(spans)-1 {
		return nil, fmt.Errorf("%q is not a comma-separated list of code spans", cell)
	}
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s[1]
	}
	return out, nil
}

// splitWhy separates a why cell into the reason and the resourceNames
// listed after its last "only:", when a list of code spans follows it.
func splitWhy(cell string) (string, []string) {
	locs := onlyRE.FindAllStringIndex(cell, -1)
	if len(locs) == 0 {
		return strings.TrimSpace(cell), nil
	}
	last := locs[len(locs)-1]
	names, err := codeList(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cell[last[1]:]), ".")))
	if err != nil {
		return strings.TrimSpace(cell), nil
	}
	return strings.TrimSpace(cell[:last[0]]), names
}

// words splits a heading into words, dropping markdown punctuation.
func words(heading string) []string {
	return strings.FieldsFunc(heading, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '`' || r == '(' || r == ')' || r == '*' || r == ',' || r == ':'
	})
}

// namedBy reports whether heading names r: its kind and name as
// consecutive words, and for a Role its namespace too.
func (r role) namedBy(heading string) bool {
	w := words(heading)
	for i := 0; i+1 < len(w); i++ {
		if w[i] == r.Kind && w[i+1] == r.Name {
			return r.Namespace == "" || slices.Contains(w, r.Namespace)
		}
	}
	return false
}

// tableFor returns the table under the one heading that names r.
func (d *doc) tableFor(r role) (*table, error) {
	var found []*section
	for _, s := range d.Sections {
		if r.namedBy(s.Heading) {
			found = append(found, s)
		}
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Errorf("%s: no heading names it in docs/dev/rbac.md; add a section %q with its table", r, "## "+r.String())
	case len(found) > 1:
		return nil, fmt.Errorf("%s: %d headings name it in docs/dev/rbac.md (lines %d and %d); keep one", r, len(found), found[0].Line, found[1].Line)
	case found[0].Table == nil:
		return nil, fmt.Errorf("%s: the heading on line %d of docs/dev/rbac.md has no table under it", r, found[0].Line)
	}
	return found[0].Table, nil
}

// describe renders a rule the way the manifest writes it.
func describe(rule rbacv1.PolicyRule) string {
	var parts []string
	if len(rule.NonResourceURLs) > 0 {
		parts = append(parts, fmt.Sprintf("nonResourceURLs [%s]", strings.Join(rule.NonResourceURLs, ", ")))
	} else {
		groups := make([]string, len(rule.APIGroups))
		for i, g := range rule.APIGroups {
			groups[i] = g
			if g == "" {
				groups[i] = `""`
			}
		}
		parts = append(parts, fmt.Sprintf("apiGroups [%s]", strings.Join(groups, ", ")),
			fmt.Sprintf("resources [%s]", strings.Join(rule.Resources, ", ")))
	}
	if len(rule.ResourceNames) > 0 {
		parts = append(parts, fmt.Sprintf("resourceNames [%s]", strings.Join(rule.ResourceNames, ", ")))
	}
	parts = append(parts, fmt.Sprintf("verbs [%s]", strings.Join(rule.Verbs, ", ")))
	return strings.Join(parts, " ")
}

// list renders a column's values for a message.
func list(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// compareRole lists how r's table differs from r's rules.
func compareRole(r role, t *table) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(t.Rows) != len(r.Rules) {
		add("%s: the manifest has %d rules, the table under %q (line %d) has %d rows", r, len(r.Rules), t.Heading, t.Line, len(t.Rows))
	}
	for i, rule := range r.Rules {
		what := fmt.Sprintf("%s, rule %d of %d (%s)", r, i+1, len(r.Rules), describe(rule))
		if i >= len(t.Rows) {
			add("%s: no row for it in the table under %q (line %d)", what, t.Heading, t.Line)
			continue
		}
		row := t.Rows[i]
		at := fmt.Sprintf("%s vs. docs/dev/rbac.md line %d", what, row.Line)
		if len(rule.NonResourceURLs) > 0 {
			if !row.NonResource {
				add("%s: a rule of nonResourceURLs, but the API group column is not %s", at, nonResourceGroup)
			}
			if !slices.Equal(rule.NonResourceURLs, row.Resources) {
				add("%s: nonResourceURLs differ: manifest %s, doc %s", at, list(rule.NonResourceURLs), list(row.Resources))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 {
				add("%s: a rule with both nonResourceURLs and resources; the doc's table cannot show it", at)
			}
		} else {
			if row.NonResource {
				add("%s: a rule of resources, but the API group column says %s", at, nonResourceGroup)
			} else if !slices.Equal(rule.APIGroups, row.Groups) {
				add("%s: API groups differ: manifest %s, doc %s", at, list(rule.APIGroups), list(row.Groups))
			}
			if !slices.Equal(rule.Resources, row.Resources) {
				add("%s: resources differ: manifest %s, doc %s", at, list(rule.Resources), list(row.Resources))
			}
		}
		if !slices.Equal(rule.Verbs, row.Verbs) {
			add("%s: verbs differ: manifest %s, doc %s", at, list(rule.Verbs), list(row.Verbs))
		}
		if !slices.Equal(rule.ResourceNames, row.Only) {
			add("%s: resourceNames differ: manifest %s, doc's \"only:\" list %s", at, list(rule.ResourceNames), list(row.Only))
		}
		if strings.TrimSpace(row.Why) == "" {
			add("%s: the why column gives no reason", at)
		}
	}
	for i := len(r.Rules); i < len(t.Rows); i++ {
		row := t.Rows[i]
		add("%s: docs/dev/rbac.md line %d (resources %s, verbs %s) matches no rule of the manifest", r, row.Line, list(row.Resources), list(row.Verbs))
	}
	return problems
}

// check lists every way the doc and the manifest disagree: a role without
// a table, a table that differs from its role's rules, and a heading that
// names a Role or ClusterRole the manifest does not have.
func check(m *manifest, d *doc) []string {
	var problems []string
	for _, r := range m.Roles {
		t, err := d.tableFor(r)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		problems = append(problems, compareRole(r, t)...)
	}
	return append(problems, staleHeadings(m, d)...)
}

// staleHeadings lists the doc's headings that begin with "ClusterRole" or
// "Role" but name no role of the manifest.
func staleHeadings(m *manifest, d *doc) []string {
	var problems []string
	for _, s := range d.Sections {
		w := words(s.Heading)
		if len(w) == 0 || (w[0] != "ClusterRole" && w[0] != "Role") {
			continue
		}
		if !slices.ContainsFunc(m.Roles, func(r role) bool { return r.namedBy(s.Heading) }) {
			problems = append(problems, fmt.Sprintf("docs/dev/rbac.md line %d: heading %q names no Role or ClusterRole of deploy/rbac.yaml", s.Line, s.Heading))
		}
	}
	return problems
}

// agentBindings lists the bindings whose subjects include the agent's
// ServiceAccount, its username, or a group every ServiceAccount of its
// namespace is in.
func agentBindings(m *manifest) []string {
	username := serviceaccount.MakeUsername(agentNamespace, agentServiceAccount)
	groups := []string{serviceaccount.AllServiceAccountsGroup, serviceaccount.MakeNamespaceGroupName(agentNamespace), user.AllAuthenticated}
	isAgent := func(s rbacv1.Subject, bindingNamespace string) bool {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			return s.Name == agentServiceAccount && ns == agentNamespace
		case rbacv1.UserKind:
			return s.Name == username
		case rbacv1.GroupKind:
			return slices.Contains(groups, s.Name)
		}
		return false
	}
	var found []string
	for _, b := range m.ClusterRoleBindings {
		for _, s := range b.Subjects {
			if isAgent(s, "") {
				found = append(found, fmt.Sprintf("ClusterRoleBinding %s binds %s %s to %s %s", b.Name, s.Kind, s.Name, b.RoleRef.Kind, b.RoleRef.Name))
			}
		}
	}
	for _, b := range m.RoleBindings {
		for _, s := range b.Subjects {
			if isAgent(s, b.Namespace) {
				found = append(found, fmt.Sprintf("RoleBinding %s/%s binds %s %s to %s %s", b.Namespace, b.Name, s.Kind, s.Name, b.RoleRef.Kind, b.RoleRef.Name))
			}
		}
	}
	return found
}

// load reads and parses the manifest and the doc.
func load(t *testing.T) ([]byte, *manifest, string, *doc) {
	t.Helper()
	raw, err := os.ReadFile(manifestPath)
	require.NoError(t, err)
	m, err := parseManifest(raw)
	require.NoError(t, err, "parse %s", manifestPath)
	md, err := os.ReadFile(docPath)
	require.NoError(t, err)
	d, err := parseDoc(string(md))
	require.NoError(t, err, "parse %s; %s", docPath, fixHint)
	return raw, m, string(md), d
}

// TestDocMatchesManifest keeps docs/dev/rbac.md in step with
// deploy/rbac.yaml: every Role and ClusterRole has a table, one row per
// rule in manifest order with the same API groups, resources (or
// nonResourceURLs), verbs and resourceNames, and a reason for each; and
// the doc has no table for a role the manifest lacks.
func TestDocMatchesManifest(t *testing.T) {
	_, m, _, d := load(t)
	require.NotEmpty(t, m.Roles, "%s has no Role or ClusterRole", manifestPath)
	for _, r := range m.Roles {
		t.Run(r.String(), func(t *testing.T) {
			tbl, err := d.tableFor(r)
			require.NoError(t, err, fixHint)
			problems := compareRole(r, tbl)
			require.Empty(t, problems, "%s\n%s", strings.Join(problems, "\n"), fixHint)
		})
	}
	t.Run("no table for a role the manifest lacks", func(t *testing.T) {
		problems := staleHeadings(m, d)
		require.Empty(t, problems, "%s\n%s", strings.Join(problems, "\n"), fixHint)
	})
}

// TestAgentHasNoBindings: the agent's ServiceAccount exists and no
// RoleBinding or ClusterRoleBinding of the manifest names it (directly, by
// username, or by a group it is in): the agent has no API permissions.
func TestAgentHasNoBindings(t *testing.T) {
	_, m, _, _ := load(t)
	require.Contains(t, m.ServiceAccounts, agentNamespace+"/"+agentServiceAccount, "%s lost the agent's ServiceAccount", manifestPath)
	found := agentBindings(m)
	require.Empty(t, found, "the agent %s/%s must have no API permissions (docs/dev/rbac.md), but %s:\n%s",
		agentNamespace, agentServiceAccount, manifestPath, strings.Join(found, "\n"))
}

// TestChecksCatchDrift runs the checks on in-memory copies of the
// manifest and the doc with one thing changed, and expects each change to
// be reported with the role, the rule and what differs.
func TestChecksCatchDrift(t *testing.T) {
	raw, _, md, _ := load(t)
	// The first rule written with a flow list of two or more verbs.
	verbsLine := regexp.MustCompile(`(?m)^(\s*verbs: \[[^\]\n]*), ([^,\]\n]+)\]$`)
	tests := []struct {
		name string
		// manifest and doc change the texts; nil keeps them.
		manifest, doc func(t *testing.T, s string) string
		// rules changes the parsed manifest; nil keeps it.
		rules func(t *testing.T, m *manifest)
		// want are substrings of one reported problem; nil wants none.
		want []string
		// agent: check the agent's bindings instead of the doc.
		agent bool
	}{
		{name: "unchanged"},
		{
			name: "a verb removed from the manifest's text",
			manifest: func(t *testing.T, s string) string {
				loc := verbsLine.FindStringSubmatchIndex(s)
				require.NotNil(t, loc, "no rule in %s has two or more verbs in a flow list", manifestPath)
				return s[:loc[0]] + s[loc[2]:loc[3]] + "]" + s[loc[1]:]
			},
			want: []string{"rule ", "verbs differ", "manifest ["},
		},
		{
			name: "a verb added to the last ClusterRole's last rule",
			rules: func(t *testing.T, m *manifest) {
				r := lastRole(t, m, "ClusterRole")
				last := &r.Rules[len(r.Rules)-1]
				last.Verbs = append(last.Verbs, "deletecollection")
			},
			want: []string{"ClusterRole ", "verbs differ", `"deletecollection"`},
		},
		{
			name: "a resource added to the Role's first rule",
			rules: func(t *testing.T, m *manifest) {
				r := lastRole(t, m, "Role")
				r.Rules[0].Resources = append(r.Rules[0].Resources, "services")
			},
			want: []string{"Role ", "rule 1 of", "resources differ", `"services"`},
		},
		{
			name:  "an API group changed",
			rules: func(t *testing.T, m *manifest) { m.Roles[0].Rules[0].APIGroups = []string{"example.com"} },
			want:  []string{m0(t, raw), "rule 1 of", "API groups differ", `"example.com"`},
		},
		{
			name: "a resourceName added",
			rules: func(t *testing.T, m *manifest) {
				r := lastRole(t, m, "Role")
				r.Rules[0].ResourceNames = append(r.Rules[0].ResourceNames, "extra")
			},
			want: []string{"Role ", "resourceNames differ", `"extra"`},
		},
		{
			name: "a rule added",
			rules: func(t *testing.T, m *manifest) {
				r := lastRole(t, m, "ClusterRole")
				r.Rules = append(r.Rules, rbacv1.PolicyRule{NonResourceURLs: []string{"/new"}, Verbs: []string{"get"}})
			},
			want: []string{"ClusterRole ", "no row for it", "/new"},
		},
		{
			name:  "a rule removed",
			rules: func(t *testing.T, m *manifest) { r := lastRole(t, m, "Role"); r.Rules = r.Rules[:len(r.Rules)-1] },
			want:  []string{"Role ", "matches no rule"},
		},
		{
			name: "a role added",
			rules: func(t *testing.T, m *manifest) {
				m.Roles = append(m.Roles, role{Kind: "ClusterRole", Name: "shoal-new"})
			},
			want: []string{"ClusterRole shoal-new", "no heading names it"},
		},
		{
			name:  "a role gone",
			rules: func(t *testing.T, m *manifest) { m.Roles = m.Roles[:len(m.Roles)-1] },
			want:  []string{"names no Role or ClusterRole"},
		},
		{
			name: "a why emptied",
			doc: func(t *testing.T, s string) string {
				i := strings.Index(s, "\n| `")
				require.Positive(t, i, "no table row in %s", docPath)
				end := strings.Index(s[i+1:], "\n") + i + 1
				cells := splitRow(s[i+1 : end])
				cells[3] = ""
				return s[:i+1] + "| " + strings.Join(cells, " | ") + " |" + s[end:]
			},
			want: []string{"rule 1 of", "gives no reason"},
		},
		{
			name: "the agent bound",
			manifest: func(t *testing.T, s string) string {
				return s + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: agent\n  namespace: shoal-system\n" +
					"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: shoal-coordinator\n" +
					"subjects:\n- kind: ServiceAccount\n  name: shoal-agent\n"
			},
			agent: true,
			want:  []string{"RoleBinding shoal-system/agent binds ServiceAccount shoal-agent"},
		},
		{
			name: "the agent's namespace group bound",
			manifest: func(t *testing.T, s string) string {
				return s + "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: all\n" +
					"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\n" +
					"subjects:\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: system:serviceaccounts:shoal-system\n"
			},
			agent: true,
			want:  []string{"ClusterRoleBinding all binds Group system:serviceaccounts:shoal-system"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifestText, docText := string(raw), md
			if tt.manifest != nil {
				manifestText = tt.manifest(t, manifestText)
				require.NotEqual(t, string(raw), manifestText, "the change left the manifest as it was")
			}
			if tt.doc != nil {
				docText = tt.doc(t, docText)
				require.NotEqual(t, md, docText, "the change left the doc as it was")
			}
			m, err := parseManifest([]byte(manifestText))
			require.NoError(t, err)
			d, err := parseDoc(docText)
			require.NoError(t, err)
			if tt.rules != nil {
				tt.rules(t, m)
			}
			var problems []string
			if tt.agent {
				problems = agentBindings(m)
			} else {
				problems = check(m, d)
			}
			if tt.want == nil {
				require.Empty(t, problems)
				return
			}
			require.True(t, slices.ContainsFunc(problems, func(p string) bool {
				for _, w := range tt.want {
					if !strings.Contains(p, w) {
						return false
					}
				}
				return true
			}), "no problem reported contains all of %q; got:\n%s", tt.want, strings.Join(problems, "\n"))
		})
	}
}

// lastRole returns the last role of kind in m, for changing in place.
func lastRole(t *testing.T, m *manifest, kind string) *role {
	t.Helper()
	for i := len(m.Roles) - 1; i >= 0; i-- {
		if m.Roles[i].Kind == kind {
			return &m.Roles[i]
		}
	}
	require.FailNow(t, "the manifest has no "+kind)
	return nil
}

// m0 names the manifest's first role, as messages do.
func m0(t *testing.T, raw []byte) string {
	t.Helper()
	m, err := parseManifest(raw)
	require.NoError(t, err)
	require.NotEmpty(t, m.Roles)
	return m.Roles[0].String()
}
