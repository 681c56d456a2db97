package certs

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// crd is a CRD named name converting with strategy (a webhook one with
// caBundle bundle).
func crd(name string, strategy apiextensionsv1.ConversionStrategyType, bundle string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
	if strategy == apiextensionsv1.WebhookConverter {
		c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{CABundle: []byte(bundle)},
			ConversionReviewVersions: []string{"v1"},
		}
	}
	return c
}

func TestPatchCRDCABundles(t *testing.T) {
	const bundle = "BUNDLE"
	names := []string{"clonesets.apps.kruise.io", "imagepulljobs.apps.kruise.io"}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		updated []string
	}{
		{"webhook CRDs get the bundle", []runtime.Object{
			crd(names[0], apiextensionsv1.WebhookConverter, ""),
			crd(names[1], apiextensionsv1.WebhookConverter, "old"),
		}, names},
		{"a CRD without a conversion webhook is left alone", []runtime.Object{
			crd(names[0], apiextensionsv1.NoneConverter, ""),
			crd(names[1], apiextensionsv1.WebhookConverter, bundle),
		}, nil},
		{"missing CRDs are skipped", []runtime.Object{crd(names[1], apiextensionsv1.WebhookConverter, "")}, names[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			// NewClientset's field-managed tracker has no schema for CRDs.
			client := apiextensionsfake.NewSimpleClientset(tc.objects...)
			require.NoError(t, PatchCRDCABundles(ctx, client, []byte(bundle), names))
			var updated []string
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" {
					updated = append(updated, a.(interface{ GetObject() runtime.Object }).GetObject().(*apiextensionsv1.CustomResourceDefinition).Name)
				}
			}
			require.Equal(t, tc.updated, updated)
			for _, n := range tc.updated {
				got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
				require.NoError(t, err)
				require.Equal(t, bundle, string(got.Spec.Conversion.Webhook.ClientConfig.CABundle))
			}
		})
	}
}
