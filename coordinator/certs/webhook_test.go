package certs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func validatingConfig(name string, bundles ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, b := range bundles {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:         "v" + string(rune('a'+i)) + ".shoal.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte(b)},
		})
	}
	return c
}

func mutatingConfig(name string, bundles ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, b := range bundles {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:         "m" + string(rune('a'+i)) + ".shoal.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte(b)},
		})
	}
	return c
}

func TestPatchWebhookCABundles(t *testing.T) {
	const bundle = "BUNDLE"
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		updates int
	}{
		{
			name: "two webhooks in each config",
			objects: []runtime.Object{
				validatingConfig(DefaultValidatingWebhook, "", "old"),
				mutatingConfig(DefaultMutatingWebhook, "old", ""),
			},
			updates: 2,
		},
		{
			name:    "missing configurations are skipped",
			objects: []runtime.Object{validatingConfig(DefaultValidatingWebhook, "old", "old")},
			updates: 1,
		},
		{
			name:    "nothing exists",
			updates: 0,
		},
		{
			name: "already current",
			objects: []runtime.Object{
				validatingConfig(DefaultValidatingWebhook, bundle, bundle),
				mutatingConfig(DefaultMutatingWebhook, bundle),
			},
			updates: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			client := fake.NewClientset(tc.objects...)
			err := PatchWebhookCABundles(ctx, client, []byte(bundle), []string{DefaultValidatingWebhook}, []string{DefaultMutatingWebhook})
			require.NoError(t, err)

			updates := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" {
					updates++
				}
			}
			require.Equal(t, tc.updates, updates)

			adm := client.AdmissionregistrationV1()
			if v, err := adm.ValidatingWebhookConfigurations().Get(ctx, DefaultValidatingWebhook, metav1.GetOptions{}); err == nil {
				for _, w := range v.Webhooks {
					require.Equal(t, bundle, string(w.ClientConfig.CABundle), w.Name)
				}
			}
			if m, err := adm.MutatingWebhookConfigurations().Get(ctx, DefaultMutatingWebhook, metav1.GetOptions{}); err == nil {
				for _, w := range m.Webhooks {
					require.Equal(t, bundle, string(w.ClientConfig.CABundle), w.Name)
				}
			}
		})
	}
}

func TestPatchWebhookCABundlesConflict(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset(validatingConfig(DefaultValidatingWebhook, "old", "old"))
	conflicts := 0
	client.PrependReactor("update", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "validatingwebhookconfigurations"}, DefaultValidatingWebhook, nil)
	})
	require.NoError(t, PatchWebhookCABundles(ctx, client, []byte("new"), []string{DefaultValidatingWebhook}, nil))
	v, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), DefaultValidatingWebhook, metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range v.Webhooks {
		require.Equal(t, "new", string(w.ClientConfig.CABundle))
	}
}

func TestPatchWebhookCABundlesError(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset(
		validatingConfig(DefaultValidatingWebhook, "old"),
		mutatingConfig(DefaultMutatingWebhook, "old"),
	)
	client.PrependReactor("update", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "validatingwebhookconfigurations"}, DefaultValidatingWebhook, nil)
	})
	err := PatchWebhookCABundles(ctx, client, []byte("new"), []string{DefaultValidatingWebhook}, []string{DefaultMutatingWebhook})
	require.ErrorContains(t, err, "ValidatingWebhookConfiguration "+DefaultValidatingWebhook)
	require.True(t, apierrors.IsForbidden(err))
	m, getErr := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, DefaultMutatingWebhook, metav1.GetOptions{})
	require.NoError(t, getErr)
	require.Equal(t, "new", string(m.Webhooks[0].ClientConfig.CABundle), "other configurations still patched")
}
