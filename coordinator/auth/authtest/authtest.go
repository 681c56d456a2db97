// Package authtest fakes the TokenReview API for tests of code that
// authenticates agents with coordinator/auth.
package authtest

import (
	"fmt"
	"slices"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/shoal-io/shoal/coordinator/auth"
)

// TokenReviewer answers TokenReviews of a fake clientset from a table of
// tokens. A token it does not know is not authenticated. It is safe for
// concurrent use.
type TokenReviewer struct {
	mu      sync.Mutex
	tokens  map[string]Token
	reviews int
	err     error
}

// Token is what the fake apiserver knows about one token.
type Token struct {
	// Status is returned as the review's status: as it is when it is not
	// authenticated, else only when the review asks for an audience in
	// Audiences, with its Audiences set to that intersection.
	Status authenticationv1.TokenReviewStatus
	// Audiences are the audiences the token was issued for.
	Audiences []string
}

// NewTokenReviewer returns a TokenReviewer that knows no token and
// installs it in cs as the reactor of "create tokenreviews".
func NewTokenReviewer(cs *fake.Clientset) *TokenReviewer {
	r := &TokenReviewer{tokens: map[string]Token{}}
	cs.PrependReactor("create", "tokenreviews", r.react)
	return r
}

// Set makes token known, replacing what was known about it.
func (r *TokenReviewer) Set(token string, t Token) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[token] = t
}

// Delete forgets token, as if its pod was deleted.
func (r *TokenReviewer) Delete(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tokens, token)
}

// FailWith makes every review fail with err (nil: answer again), as if
// the apiserver could not be reached.
func (r *TokenReviewer) FailWith(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Reviews is the number of TokenReviews received so far.
func (r *TokenReviewer) Reviews() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reviews
}

func (r *TokenReviewer) react(action k8stesting.Action) (bool, runtime.Object, error) {
	create, ok := action.(k8stesting.CreateAction)
	if !ok {
		return true, nil, fmt.Errorf("unexpected action %T", action)
	}
	review, ok := create.GetObject().(*authenticationv1.TokenReview)
	if !ok {
		return true, nil, fmt.Errorf("unexpected object %T", create.GetObject())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reviews++
	if r.err != nil {
		return true, nil, r.err
	}
	out := review.DeepCopy()
	t, known := r.tokens[review.Spec.Token]
	switch {
	case !known:
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	case !t.Status.Authenticated:
		out.Status = *t.Status.DeepCopy()
	default:
		var auds []string
		for _, a := range review.Spec.Audiences {
			if slices.Contains(t.Audiences, a) {
				auds = append(auds, a)
			}
		}
		if len(review.Spec.Audiences) == 0 {
			auds = slices.Clone(t.Audiences)
		}
		if len(auds) == 0 {
			out.Status = authenticationv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
			break
		}
		out.Status = *t.Status.DeepCopy()
		out.Status.Audiences = auds
	}
	return true, out, nil
}

// PodToken is a Token of ServiceAccount sa ("namespace:name") for
// audience, bound to pod podName (uid podUID) on node nodeName, as the
// apiserver reports a projected token of a running pod.
func PodToken(sa, audience, podName, podUID, nodeName string) Token {
	return Token{
		Audiences: []string{audience},
		Status: authenticationv1.TokenReviewStatus{
			Authenticated: true,
			User: authenticationv1.UserInfo{
				Username: ServiceAccountUser(sa),
				Extra: map[string]authenticationv1.ExtraValue{
					auth.ExtraPodName:  {podName},
					auth.ExtraPodUID:   {podUID},
					auth.ExtraNodeName: {nodeName},
				},
			},
		},
	}
}

// ServiceAccountUser is the username of ServiceAccount sa
// ("namespace:name").
func ServiceAccountUser(sa string) string {
	return "system:serviceaccount:" + sa
}
