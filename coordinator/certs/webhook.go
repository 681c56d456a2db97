package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Names of the coordinator's webhook configurations (docs/dev/backbone.md).
const (
	// DefaultValidatingWebhook is the coordinator's
	// ValidatingWebhookConfiguration.
	DefaultValidatingWebhook = "shoal-validating"
	// DefaultMutatingWebhook is the coordinator's
	// MutatingWebhookConfiguration.
	DefaultMutatingWebhook = "shoal-mutating"
	// PodMutatingWebhook is the optional MutatingWebhookConfiguration for
	// pods (deploy/components/kruise-pod-readiness-gate); skipped while it
	// is not installed.
	PodMutatingWebhook = "shoal-pods"
)

// PatchWebhookCABundles sets clientConfig.caBundle to bundlePEM on every
// webhook of the named ValidatingWebhookConfigurations and
// MutatingWebhookConfigurations where it differs. A configuration that
// does not exist is skipped. It tries every configuration and returns the
// errors together.
func PatchWebhookCABundles(ctx context.Context, client kubernetes.Interface, bundlePEM []byte, validatingNames, mutatingNames []string) error {
	adm := client.AdmissionregistrationV1()
	errs := patchCABundles(ctx, adm.ValidatingWebhookConfigurations(), "ValidatingWebhookConfiguration", validatingNames, bundlePEM,
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			var ccs []*admissionregistrationv1.WebhookClientConfig
			for i := range c.Webhooks {
				ccs = append(ccs, &c.Webhooks[i].ClientConfig)
			}
			return ccs
		})
	errs = append(errs, patchCABundles(ctx, adm.MutatingWebhookConfigurations(), "MutatingWebhookConfiguration", mutatingNames, bundlePEM,
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			var ccs []*admissionregistrationv1.WebhookClientConfig
			for i := range c.Webhooks {
				ccs = append(ccs, &c.Webhooks[i].ClientConfig)
			}
			return ccs
		})...)
	return errors.Join(errs...)
}

// webhookConfigs is the part of a typed webhook configuration client that
// patchCABundles uses.
type webhookConfigs[T interface{ DeepCopy() T }] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// patchCABundles sets the caBundle of every client config of the named
// objects, re-reading on conflict. Missing objects are skipped.
func patchCABundles[T interface{ DeepCopy() T }](ctx context.Context, client webhookConfigs[T], kind string, names []string, bundlePEM []byte,
	clientConfigs func(T) []*admissionregistrationv1.WebhookClientConfig) []error {
	var errs []error
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj = obj.DeepCopy()
			changed := 0
			for _, cc := range clientConfigs(obj) {
				if !bytes.Equal(cc.CABundle, bundlePEM) {
					cc.CABundle = bytes.Clone(bundlePEM)
					changed++
				}
			}
			if changed == 0 {
				return nil
			}
			if _, err := client.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
				return err
			}
			klog.FromContext(ctx).Info("Updated webhook caBundle", "kind", kind, "name", name, "webhooks", changed)
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("set caBundle of %s %s: %w", kind, name, err))
		}
	}
	return errs
}
