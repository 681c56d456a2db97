package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/coordinator/auth/authtest"
)

// rbac answers SubjectAccessReviews of a fake clientset: user may get the
// paths it lists. It keeps the last review it saw.
type rbac struct {
	allow map[string][]string
	last  *authorizationv1.SubjectAccessReview
	err   error
}

func (r *rbac) react(action k8stesting.Action) (bool, runtime.Object, error) {
	sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	r.last = sar
	if r.err != nil {
		return true, nil, r.err
	}
	a := sar.Spec.NonResourceAttributes
	for _, p := range r.allow[sar.Spec.User] {
		if a != nil && a.Verb == "get" && a.Path == p {
			sar.Status.Allowed = true
			return true, sar, nil
		}
	}
	return true, sar, nil
}

// TestAccessReview: a token the apiserver does not know is not
// authenticated; a known one is allowed exactly the paths its user's RBAC
// grants, and the SubjectAccessReview carries the token's whole identity.
func TestAccessReview(t *testing.T) {
	cs := fake.NewClientset()
	tokens := authtest.NewTokenReviewer(cs)
	authz := &rbac{allow: map[string][]string{"system:serviceaccount:ops:reader": {"/inventory"}}}
	cs.PrependReactor("create", "subjectaccessreviews", authz.react)
	user := func(name string) authtest.Token {
		return authtest.Token{Audiences: []string{"https://kubernetes.default.svc"}, Status: authenticationv1.TokenReviewStatus{
			Authenticated: true,
			User: authenticationv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authenticationv1.ExtraValue{auth.ExtraNodeName: {"node-1"}}},
		}}
	}
	tokens.Set("reader-token", user("system:serviceaccount:ops:reader"))
	tokens.Set("other-token", user("system:serviceaccount:ops:other"))
	r := &auth.AccessReviewer{Client: cs}

	for _, tc := range []struct {
		name, token, path string
		want              auth.AccessDecision
	}{
		{"no token", "", "/inventory", auth.AccessDecision{Reason: "no bearer token"}},
		{"unknown token", "forged", "/inventory", auth.AccessDecision{Reason: "invalid bearer token"}},
		{"granted", "reader-token", "/inventory", auth.AccessDecision{Authenticated: true, Allowed: true, User: "system:serviceaccount:ops:reader"}},
		{"other path", "reader-token", "/mesh", auth.AccessDecision{Authenticated: true, User: "system:serviceaccount:ops:reader",
			Reason: "system:serviceaccount:ops:reader may not get /mesh: grant it with a ClusterRole rule nonResourceURLs [/mesh], verbs [get] (shoal-agent-endpoints-reader has it)"}},
		{"no grant", "other-token", "/inventory", auth.AccessDecision{Authenticated: true, User: "system:serviceaccount:ops:other",
			Reason: "system:serviceaccount:ops:other may not get /inventory: grant it with a ClusterRole rule nonResourceURLs [/inventory], verbs [get] (shoal-agent-endpoints-reader has it)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := r.Review(context.Background(), tc.token, "get", tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.want, d)
		})
	}

	// The SubjectAccessReview is about the token's user, not the
	// coordinator's.
	_, err := r.Review(context.Background(), "other-token", "get", "/debug/pprof/heap")
	require.NoError(t, err)
	require.Equal(t, authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:ops:other", UID: "uid-system:serviceaccount:ops:other", Groups: []string{"system:serviceaccounts"},
		Extra:                 map[string]authorizationv1.ExtraValue{auth.ExtraNodeName: {"node-1"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/pprof/heap", Verb: "get"},
	}, authz.last.Spec)
}

// TestAccessReviewErrors: input that is no endpoint request, and reviews
// the apiserver could not answer, are errors, not decisions.
func TestAccessReviewErrors(t *testing.T) {
	cs := fake.NewClientset()
	tokens := authtest.NewTokenReviewer(cs)
	authz := &rbac{}
	cs.PrependReactor("create", "subjectaccessreviews", authz.react)
	tokens.Set("t", authtest.Token{Audiences: []string{"api"}, Status: authenticationv1.TokenReviewStatus{
		Authenticated: true, User: authenticationv1.UserInfo{Username: "u"}}})
	r := &auth.AccessReviewer{Client: cs}

	for _, tc := range []struct {
		name, verb, path, want string
		setup                  func()
	}{
		{name: "write verb", verb: "create", path: "/inventory", want: `verb "create": agent endpoints are read with get only`},
		{name: "relative path", verb: "get", path: "inventory", want: "want an absolute URL path"},
		{name: "long path", verb: "get", path: "/" + strings.Repeat("a", 1024), want: "want an absolute URL path"},
		{name: "token review fails", verb: "get", path: "/inventory", want: "token review: apiserver away",
			setup: func() { tokens.FailWith(errors.New("apiserver away")) }},
		{name: "access review fails", verb: "get", path: "/inventory", want: "subject access review of u for get /inventory: timeout",
			setup: func() { tokens.FailWith(nil); authz.err = fmt.Errorf("timeout") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			_, err := r.Review(context.Background(), "t", tc.verb, tc.path)
			require.ErrorContains(t, err, tc.want)
		})
	}

	d, err := r.Review(context.Background(), strings.Repeat("x", 16<<10+1), "get", "/inventory")
	require.NoError(t, err)
	require.Equal(t, auth.AccessDecision{Reason: "bearer token longer than 16384 bytes"}, d)
	_, err = (&auth.AccessReviewer{}).Review(context.Background(), "t", "get", "/inventory")
	require.ErrorContains(t, err, "no Kubernetes client")
}
