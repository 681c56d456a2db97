package crdvalidation_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// userGuideDir holds the user guide, one page per kind.
const userGuideDir = "../../docs/user"

// userGuideSections are the headings every kind's page has.
var userGuideSections = []string{
	"## What it is for", "## Example", "## Differences from OpenKruise", "## What to watch", "## Bad input",
}

// guidePages are the pages of docs/user that are not a kind's: the index
// and the guides. They have no fixed sections.
var guidePages = map[string]bool{"README.md": true, "moving-from-openkruise.md": true}

// yamlBlock is a fenced YAML block of a page.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestUserGuideExamples: every page of docs/user (but its index) has the
// guide's sections and at least one YAML example, and every Kruise object
// of its examples is valid against Shoal's CRDs (schema, CEL, unknown
// fields), so the examples keep applying as the API changes. Every kind
// Shoal serves is the example of some page, so no kind goes without one.
func TestUserGuideExamples(t *testing.T) {
	set := loadCRDs(t)
	pages, err := filepath.Glob(filepath.Join(userGuideDir, "*.md"))
	require.NoError(t, err)
	index, err := os.ReadFile(filepath.Join(userGuideDir, "README.md"))
	require.NoError(t, err)
	var n int
	exampled := map[string]bool{}
	for _, page := range pages {
		name := filepath.Base(page)
		if name == "README.md" {
			continue
		}
		if guidePages[name] {
			require.Contains(t, string(index), "("+name+")", "the index (docs/user/README.md) links %s", name)
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			require.Contains(t, string(index), "("+name+")", "the index (docs/user/README.md) links the page")
			b, err := os.ReadFile(page)
			require.NoError(t, err)
			for _, s := range userGuideSections {
				require.Contains(t, string(b), "\n"+s+"\n", "section %q", s)
			}
			blocks := yamlBlock.FindAllSubmatch(b, -1)
			require.NotEmpty(t, blocks, "no ```yaml example")
			for i, block := range blocks {
				for j, doc := range bytes.Split(block[1], []byte("\n---\n")) {
					js, err := yaml.YAMLToJSON(doc)
					require.NoError(t, err, "example %d, document %d", i+1, j+1)
					obj := &unstructured.Unstructured{}
					require.NoError(t, obj.UnmarshalJSON(js), "example %d, document %d", i+1, j+1)
					gvk := obj.GroupVersionKind()
					if !strings.HasSuffix(gvk.Group, "kruise.io") {
						continue
					}
					require.True(t, set.Has(gvk), "example %d: %s is not a kind Shoal serves", i+1, gvk)
					exampled[gvk.Kind] = true
					errs := set.Validate(obj, nil)
					require.Empty(t, errs, "example %d: %s %s: %v", i+1, gvk.Kind, obj.GetName(), errs.ToAggregate())
				}
			}
		})
	}
	require.NotZero(t, n, "no pages in %s", userGuideDir)
	for _, kind := range set.Kinds() {
		require.True(t, exampled[kind], "no page of %s has an example of %s: write its page and link it from README.md", userGuideDir, kind)
	}
}
