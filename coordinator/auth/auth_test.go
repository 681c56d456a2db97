package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/coordinator/auth/authtest"
)

const (
	audience = "shoal-coordinator"
	agentSA  = "shoal-system:shoal-agent"
)

var agentUser = authtest.ServiceAccountUser(agentSA)

func newAuthenticator(cs *fake.Clientset, clk *clocktesting.FakePassiveClock) *auth.Authenticator {
	return &auth.Authenticator{Client: cs, Audience: audience, ServiceAccount: agentSA, Clock: clk}
}

// TestAuthenticateStatus runs every branch of the review's status check
// against a reactor that answers with a fixed status.
func TestAuthenticateStatus(t *testing.T) {
	podExtra := func(drop string, extra map[string]authenticationv1.ExtraValue) map[string]authenticationv1.ExtraValue {
		out := map[string]authenticationv1.ExtraValue{
			auth.ExtraPodName:  {"agent-x"},
			auth.ExtraPodUID:   {"uid-x"},
			auth.ExtraNodeName: {"node-a"},
		}
		delete(out, drop)
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	ok := func(mod func(*authenticationv1.TokenReviewStatus)) authenticationv1.TokenReviewStatus {
		st := authenticationv1.TokenReviewStatus{
			Authenticated: true,
			Audiences:     []string{audience},
			User:          authenticationv1.UserInfo{Username: agentUser, Extra: podExtra("", nil)},
		}
		if mod != nil {
			mod(&st)
		}
		return st
	}
	tests := []struct {
		name    string
		status  authenticationv1.TokenReviewStatus
		apiErr  error
		wantErr error  // nil: success
		wantMsg string // part of the error message
	}{
		{name: "pod-bound token of the agent", status: ok(nil)},
		{
			name:    "not authenticated, with the apiserver's reason",
			status:  authenticationv1.TokenReviewStatus{Error: "token has expired"},
			wantErr: auth.ErrUnauthenticated, wantMsg: "token has expired",
		},
		{
			name:    "not authenticated, no reason",
			status:  authenticationv1.TokenReviewStatus{},
			wantErr: auth.ErrUnauthenticated, wantMsg: "not authenticated",
		},
		{
			name:    "authenticated for no audience",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.Audiences = nil }),
			wantErr: auth.ErrUnauthenticated, wantMsg: "audience",
		},
		{
			name:    "authenticated for another audience",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.Audiences = []string{"https://kubernetes.default.svc"} }),
			wantErr: auth.ErrUnauthenticated, wantMsg: "audience",
		},
		{
			name:    "another service account",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:default:default" }),
			wantErr: auth.ErrForbidden, wantMsg: "system:serviceaccount:default:default",
		},
		{
			name:    "a user that is no service account",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.User.Username = "admin" }),
			wantErr: auth.ErrForbidden, wantMsg: "admin",
		},
		{
			name:    "not bound to a pod",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.User.Extra = nil }),
			wantErr: auth.ErrForbidden, wantMsg: "not bound to a pod",
		},
		{
			name:    "no pod uid",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.User.Extra = podExtra(auth.ExtraPodUID, nil) }),
			wantErr: auth.ErrForbidden, wantMsg: auth.ExtraPodUID,
		},
		{
			name:    "pod-bound without node name",
			status:  ok(func(s *authenticationv1.TokenReviewStatus) { s.User.Extra = podExtra(auth.ExtraNodeName, nil) }),
			wantErr: auth.ErrForbidden, wantMsg: auth.ExtraNodeName,
		},
		{
			name: "two node names",
			status: ok(func(s *authenticationv1.TokenReviewStatus) {
				s.User.Extra = podExtra("", map[string]authenticationv1.ExtraValue{auth.ExtraNodeName: {"node-a", "node-b"}})
			}),
			wantErr: auth.ErrForbidden, wantMsg: auth.ExtraNodeName,
		},
		{
			name: "empty node name",
			status: ok(func(s *authenticationv1.TokenReviewStatus) {
				s.User.Extra = podExtra("", map[string]authenticationv1.ExtraValue{auth.ExtraNodeName: {""}})
			}),
			wantErr: auth.ErrForbidden, wantMsg: auth.ExtraNodeName,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			var sent *authenticationv1.TokenReview
			cs.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
				sent = action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
				out := sent.DeepCopy()
				out.Status = tc.status
				return true, out, nil
			})
			a := newAuthenticator(cs, clocktesting.NewFakePassiveClock(time.Now()))

			id, err := a.Authenticate(t.Context(), "the-token")
			require.NotNil(t, sent, "no TokenReview was sent")
			require.Equal(t, "the-token", sent.Spec.Token)
			require.Equal(t, []string{audience}, sent.Spec.Audiences)
			if tc.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, auth.Identity{Username: agentUser, NodeName: "node-a", PodName: "agent-x", PodUID: "uid-x"}, id)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			require.ErrorContains(t, err, tc.wantMsg)
			require.Equal(t, auth.Identity{}, id)
		})
	}
}

// TestAuthenticateErrors covers the refusals made before or instead of a
// review's answer.
func TestAuthenticateErrors(t *testing.T) {
	tests := []struct {
		name      string
		configure func(a *auth.Authenticator, r *authtest.TokenReviewer)
		token     string
		wantErr   error // a sentinel, or nil for an error that wraps none
		wantMsg   string
		reviews   int
	}{
		{name: "empty token", token: "", wantErr: auth.ErrUnauthenticated, wantMsg: "no token"},
		{name: "unknown token", token: "garbage", wantErr: auth.ErrUnauthenticated, wantMsg: "invalid bearer token", reviews: 1},
		{
			name:  "token of another audience",
			token: "t",
			configure: func(_ *auth.Authenticator, r *authtest.TokenReviewer) {
				tok := authtest.PodToken(agentSA, "other", "p", "u", "n")
				r.Set("t", tok)
			},
			wantErr: auth.ErrUnauthenticated, wantMsg: "audiences", reviews: 1,
		},
		{
			name:  "apiserver unreachable",
			token: "t",
			configure: func(_ *auth.Authenticator, r *authtest.TokenReviewer) {
				r.FailWith(errors.New("connection refused"))
			},
			wantMsg: "token review: connection refused", reviews: 1,
		},
		{
			name:  "malformed service account",
			token: "t",
			configure: func(a *auth.Authenticator, _ *authtest.TokenReviewer) {
				a.ServiceAccount = "shoal-agent"
			},
			wantMsg: "want namespace:name",
		},
		{
			name:  "no audience",
			token: "t",
			configure: func(a *auth.Authenticator, _ *authtest.TokenReviewer) {
				a.Audience = ""
			},
			wantMsg: "no audience",
		},
		{
			name:  "no client",
			token: "t",
			configure: func(a *auth.Authenticator, _ *authtest.TokenReviewer) {
				a.Client = nil
			},
			wantMsg: "no Kubernetes client",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			r := authtest.NewTokenReviewer(cs)
			a := newAuthenticator(cs, clocktesting.NewFakePassiveClock(time.Now()))
			if tc.configure != nil {
				tc.configure(a, r)
			}
			_, err := a.Authenticate(t.Context(), tc.token)
			require.ErrorContains(t, err, tc.wantMsg)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NotErrorIs(t, err, auth.ErrUnauthenticated)
				require.NotErrorIs(t, err, auth.ErrForbidden)
			}
			require.Equal(t, tc.reviews, r.Reviews())
		})
	}
}

// jwtWithExp is a token that looks like a JWT expiring at exp (unsigned:
// only the apiserver fake judges it).
func jwtWithExp(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." +
		enc(fmt.Appendf(nil, `{"exp":%d,"sub":"x"}`, exp.Unix())) + "." + enc([]byte("sig"))
}

func TestAuthenticateCache(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tok := authtest.PodToken(agentSA, audience, "agent-a", "uid-a", "node-a")

	t.Run("reuses a success until the TTL", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		clk := clocktesting.NewFakePassiveClock(start)
		a := newAuthenticator(cs, clk)
		a.CacheTTL = 30 * time.Second
		r.Set("t", tok)

		id, err := a.Authenticate(t.Context(), "t")
		require.NoError(t, err)
		require.Equal(t, "node-a", id.NodeName)
		r.Delete("t") // the pod is gone, the cache does not know yet
		clk.SetTime(start.Add(29 * time.Second))
		id2, err := a.Authenticate(t.Context(), "t")
		require.NoError(t, err)
		require.Equal(t, id, id2)
		require.Equal(t, 1, r.Reviews())

		clk.SetTime(start.Add(30 * time.Second))
		_, err = a.Authenticate(t.Context(), "t")
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		require.Equal(t, 2, r.Reviews())
	})

	t.Run("default TTL is one minute", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		clk := clocktesting.NewFakePassiveClock(start)
		a := newAuthenticator(cs, clk)
		r.Set("t", tok)
		for _, at := range []time.Duration{0, 59 * time.Second, time.Minute} {
			clk.SetTime(start.Add(at))
			_, err := a.Authenticate(t.Context(), "t")
			require.NoError(t, err)
		}
		require.Equal(t, 2, r.Reviews())
	})

	t.Run("never caches a failure", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		a := newAuthenticator(cs, clocktesting.NewFakePassiveClock(start))
		_, err := a.Authenticate(t.Context(), "t")
		require.ErrorIs(t, err, auth.ErrUnauthenticated)

		r.Set("t", authtest.PodToken("default:default", audience, "p", "u", "n"))
		_, err = a.Authenticate(t.Context(), "t")
		require.ErrorIs(t, err, auth.ErrForbidden)

		r.Set("t", tok)
		_, err = a.Authenticate(t.Context(), "t")
		require.NoError(t, err)
		require.Equal(t, 3, r.Reviews())
	})

	t.Run("not past the token's expiry", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		clk := clocktesting.NewFakePassiveClock(start)
		a := newAuthenticator(cs, clk)
		token := jwtWithExp(start.Add(10 * time.Second))
		r.Set(token, tok)

		_, err := a.Authenticate(t.Context(), token)
		require.NoError(t, err)
		clk.SetTime(start.Add(9 * time.Second))
		_, err = a.Authenticate(t.Context(), token)
		require.NoError(t, err)
		require.Equal(t, 1, r.Reviews())

		r.Set(token, authtest.Token{Status: authenticationv1.TokenReviewStatus{Error: "token has expired"}})
		clk.SetTime(start.Add(10 * time.Second))
		_, err = a.Authenticate(t.Context(), token)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		require.ErrorContains(t, err, "token has expired")
		require.Equal(t, 2, r.Reviews())
	})

	t.Run("a negative TTL turns the cache off", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		a := newAuthenticator(cs, clocktesting.NewFakePassiveClock(start))
		a.CacheTTL = -1
		r.Set("t", tok)
		for range 3 {
			_, err := a.Authenticate(t.Context(), "t")
			require.NoError(t, err)
		}
		require.Equal(t, 3, r.Reviews())
	})

	t.Run("bounded size drops what expires first", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		clk := clocktesting.NewFakePassiveClock(start)
		a := newAuthenticator(cs, clk)
		a.CacheSize = 2
		for i, name := range []string{"t1", "t2", "t3"} {
			r.Set(name, tok)
			clk.SetTime(start.Add(time.Duration(i) * time.Second))
			_, err := a.Authenticate(t.Context(), name)
			require.NoError(t, err)
		}
		require.Equal(t, 3, r.Reviews())
		// t1 expired first and was dropped; t2 and t3 are still cached.
		for _, name := range []string{"t2", "t3"} {
			_, err := a.Authenticate(t.Context(), name)
			require.NoError(t, err)
		}
		require.Equal(t, 3, r.Reviews())
		_, err := a.Authenticate(t.Context(), "t1")
		require.NoError(t, err)
		require.Equal(t, 4, r.Reviews())
	})

	t.Run("concurrent use", func(t *testing.T) {
		cs := fake.NewClientset()
		r := authtest.NewTokenReviewer(cs)
		a := newAuthenticator(cs, clocktesting.NewFakePassiveClock(start))
		a.CacheSize = 3
		for i := range 8 {
			r.Set(fmt.Sprint("t", i), tok)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				var err error
				for j := range 20 {
					if _, e := a.Authenticate(ctx, fmt.Sprint("t", (i+j)%8)); e != nil {
						err = e
					}
				}
				errs <- err
			}()
		}
		for range 8 {
			require.NoError(t, <-errs)
		}
	})
}

func TestBearerFromMetadata(t *testing.T) {
	tests := []struct {
		name    string
		md      metadata.MD
		want    string
		wantErr string
	}{
		{name: "bearer", md: metadata.Pairs("authorization", "Bearer abc.def.ghi"), want: "abc.def.ghi"},
		{name: "scheme in any case", md: metadata.Pairs("Authorization", "bearer tok"), want: "tok"},
		{name: "surrounding spaces", md: metadata.Pairs("authorization", " Bearer  tok "), want: "tok"},
		{name: "no metadata", md: nil, wantErr: "no authorization metadata"},
		{name: "other keys only", md: metadata.Pairs("x-node", "n"), wantErr: "no authorization metadata"},
		{name: "two values", md: metadata.Pairs("authorization", "Bearer a", "authorization", "Bearer b"), wantErr: "2 authorization metadata values"},
		{name: "basic scheme", md: metadata.Pairs("authorization", "Basic dXNlcjpwdw=="), wantErr: "not \"Bearer <token>\""},
		{name: "token without scheme", md: metadata.Pairs("authorization", "abc"), wantErr: "not \"Bearer <token>\""},
		{name: "empty token", md: metadata.Pairs("authorization", "Bearer "), wantErr: "empty bearer token"},
		{name: "blank token", md: metadata.Pairs("authorization", "Bearer \t "), wantErr: "empty bearer token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.BearerFromMetadata(tc.md)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, auth.ErrUnauthenticated)
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCheckNode(t *testing.T) {
	id := auth.Identity{Username: agentUser, NodeName: "node-a", PodName: "agent-x", PodUID: "u"}
	tests := []struct {
		name    string
		claimed string
		wantErr []string // parts of the message; none: allowed
	}{
		{name: "own node", claimed: "node-a"},
		{name: "another node", claimed: "node-b", wantErr: []string{`"node-a"`, `"node-b"`}},
		{name: "no node", claimed: "", wantErr: []string{`"node-a"`, "named no node"}},
		{name: "case differs", claimed: "Node-A", wantErr: []string{`"node-a"`, `"Node-A"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := auth.CheckNode(id, tc.claimed)
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, auth.ErrForbidden)
			for _, part := range tc.wantErr {
				require.ErrorContains(t, err, part)
			}
		})
	}
}
