package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// PatchCRDCABundles sets spec.conversion.webhook.clientConfig.caBundle to
// bundlePEM on each named CRD whose conversion strategy is Webhook, where
// it differs. A CRD that does not exist, or converts without a webhook, is
// skipped. It tries every CRD and returns the errors together.
func PatchCRDCABundles(ctx context.Context, client apiextensionsclient.Interface, bundlePEM []byte, names []string) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	var errs []error
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := crd.Spec.Conversion
			if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil ||
				bytes.Equal(c.Webhook.ClientConfig.CABundle, bundlePEM) {
				return nil
			}
			crd = crd.DeepCopy()
			crd.Spec.Conversion.Webhook.ClientConfig.CABundle = bytes.Clone(bundlePEM)
			if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
				return err
			}
			klog.FromContext(ctx).Info("Updated the conversion webhook's caBundle", "crd", name)
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("set the conversion caBundle of CRD %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
