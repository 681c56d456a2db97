package auth

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Limits of an access review's input: anything larger is not a request to
// an agent endpoint.
const (
	maxReviewTokenBytes = 16 << 10
	maxReviewPathBytes  = 1024
)

// AccessDecision is the answer to an access review.
type AccessDecision struct {
	// Authenticated is true when the apiserver accepted the token.
	Authenticated bool
	// Allowed is true when the token's user may use the verb on the path.
	Allowed bool
	// User is the token's username, when authenticated.
	User string
	// Reason explains a refusal.
	Reason string
}

// AccessReviewer decides whether a client may use one of an agent's HTTP
// endpoints, the way kubelet guards its own: the client's bearer token
// goes to a TokenReview (any audience the apiserver accepts by default,
// as for a token kubectl would send), then the token's user to a
// SubjectAccessReview of the verb on the endpoint's path, a non-resource
// URL. RBAC grants it with a ClusterRole rule such as
// nonResourceURLs: ["/inventory"], verbs: ["get"].
type AccessReviewer struct {
	// Client sends the reviews; it needs create on
	// tokenreviews.authentication.k8s.io and
	// subjectaccessreviews.authorization.k8s.io.
	Client kubernetes.Interface
}

// Review decides on token using verb on path. A refusal is a decision,
// not an error; the error is for reviews that could not be made (the
// apiserver unreachable) or input that is not an endpoint request.
func (r *AccessReviewer) Review(ctx context.Context, token, verb, path string) (AccessDecision, error) {
	switch {
	case r.Client == nil:
		return AccessDecision{}, fmt.Errorf("access reviewer: no Kubernetes client")
	case verb != "get":
		return AccessDecision{}, fmt.Errorf("verb %q: agent endpoints are read with get only", verb)
	case !strings.HasPrefix(path, "/") || len(path) > maxReviewPathBytes:
		return AccessDecision{}, fmt.Errorf("path %.64q: want an absolute URL path of at most %d bytes", path, maxReviewPathBytes)
	case token == "":
		return AccessDecision{Reason: "no bearer token"}, nil
	case len(token) > maxReviewTokenBytes:
		return AccessDecision{Reason: fmt.Sprintf("bearer token longer than %d bytes", maxReviewTokenBytes)}, nil
	}
	tr, err := r.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return AccessDecision{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		reason := tr.Status.Error
		if reason == "" {
			reason = "token not authenticated"
		}
		return AccessDecision{Reason: reason}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return AccessDecision{}, fmt.Errorf("subject access review of %s for %s %s: %w", u.Username, verb, path, err)
	}
	d := AccessDecision{Authenticated: true, Allowed: sar.Status.Allowed && !sar.Status.Denied, User: u.Username}
	if !d.Allowed {
		d.Reason = sar.Status.Reason
		if d.Reason == "" {
			d.Reason = fmt.Sprintf("%s may not %s %s: grant it with a ClusterRole rule nonResourceURLs [%s], verbs [get] (shoal-agent-endpoints-reader has it)", u.Username, verb, path, path)
		}
	}
	return d, nil
}
