package sidecarcontrol

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestMatches(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1", Labels: map[string]string{"env": "prod"}}}
	for _, tc := range []struct {
		name    string
		set     func(*appsv1beta1.SidecarSet)
		ns      *corev1.Namespace
		want    bool
		wantErr string
	}{
		{name: "selector matches", set: func(*appsv1beta1.SidecarSet) {}, ns: ns, want: true},
		{name: "no namespace needed without namespaceSelector", set: func(*appsv1beta1.SidecarSet) {}, want: true},
		{name: "selector does not match", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.Selector.MatchLabels["app"] = "db"
		}, ns: ns},
		{name: "nil selector selects nothing", set: func(s *appsv1beta1.SidecarSet) { s.Spec.Selector = nil }, ns: ns},
		{name: "empty selector selects nothing", set: func(s *appsv1beta1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} }, ns: ns},
		{name: "invalid selector", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		}, ns: ns, wantErr: "spec.selector"},
		{name: "namespaceSelector on labels", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		}, ns: ns, want: true},
		{name: "namespaceSelector does not match", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
		}, ns: ns},
		{name: "namespaceSelector on the name label the namespace lacks", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ns1"}}
		}, ns: ns, want: true},
		{name: "namespaceSelector without the namespace", set: func(s *appsv1beta1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{}
		}, wantErr: "namespaceSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := newSet("s")
			tc.set(set)
			got, err := Matches(set, newPod(), tc.ns)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
