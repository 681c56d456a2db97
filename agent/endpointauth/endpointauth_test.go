package endpointauth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/agent/endpointauth"
)

// reviews is a Reviewer with a table of users by token and of the paths
// each user may get; it counts the reviews it makes.
type reviews struct {
	mu    sync.Mutex
	users map[string]string
	allow map[string][]string
	err   error
	count int
}

func (r *reviews) Review(_ context.Context, token, verb, path string) (endpointauth.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if r.err != nil {
		return endpointauth.Decision{}, r.err
	}
	user, ok := r.users[token]
	if !ok {
		return endpointauth.Decision{Reason: "invalid bearer token"}, nil
	}
	for _, p := range r.allow[user] {
		if verb == "get" && p == path {
			return endpointauth.Decision{Authenticated: true, Allowed: true, User: user}, nil
		}
	}
	return endpointauth.Decision{Authenticated: true, User: user, Reason: user + " may not get " + path}, nil
}

func (r *reviews) reviews() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func get(t *testing.T, h http.Handler, method, path, authorization string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body), rec.Result().Header
}

// TestProtect: the answer for each kind of client, and the secret body
// only behind a 200.
func TestProtect(t *testing.T) {
	rv := &reviews{users: map[string]string{"reader": "ops:reader", "other": "ops:other"}, allow: map[string][]string{"ops:reader": {"/inventory"}}}
	reg := prometheus.NewRegistry()
	g := &endpointauth.Guard{Reviewer: rv, Registerer: reg}
	h := g.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("the node's pods")) }))

	for _, tc := range []struct {
		name, method, path, auth string
		code                     int
		body                     string
	}{
		{"no token", http.MethodGet, "/inventory", "", 401, "send a Kubernetes bearer token"},
		{"basic auth", http.MethodGet, "/inventory", "Basic dXNlcjpwYXNz", 401, "send a Kubernetes bearer token"},
		{"empty bearer", http.MethodGet, "/inventory", "Bearer ", 401, "send a Kubernetes bearer token"},
		{"unknown token", http.MethodGet, "/inventory", "Bearer forged", 401, "token not accepted: invalid bearer token"},
		{"no grant", http.MethodGet, "/inventory", "Bearer other", 403, "ops:other may not get /inventory"},
		{"grant for another path", http.MethodGet, "/mesh", "Bearer reader", 403, "ops:reader may not get /mesh"},
		{"granted", http.MethodGet, "/inventory", "Bearer reader", 200, "the node's pods"},
		{"scheme in lower case", http.MethodGet, "/inventory", "bearer reader", 200, "the node's pods"},
		{"write", http.MethodPost, "/inventory", "Bearer reader", 405, "only GET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, hdr := get(t, h, tc.method, tc.path, tc.auth)
			require.Equal(t, tc.code, code, body)
			require.Contains(t, body, tc.body)
			if code != 200 {
				require.NotContains(t, body, "the node's pods")
			}
			if code == 401 {
				require.Equal(t, `Bearer realm="shoal-agent"`, hdr.Get("WWW-Authenticate"))
			}
		})
	}
	require.InDelta(t, 2, testutil.ToFloat64(g.RequestsCounter("allowed")), 0)
	require.InDelta(t, 4, testutil.ToFloat64(g.RequestsCounter("unauthenticated")), 0)
	require.InDelta(t, 2, testutil.ToFloat64(g.RequestsCounter("forbidden")), 0)
}

// TestProtectCache: a decision is reused for its TTL, allowed ones longer
// than refused ones; a failed review is not cached and answers 503.
func TestProtectCache(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	rv := &reviews{users: map[string]string{"reader": "r", "other": "o"}, allow: map[string][]string{"r": {"/mesh"}}}
	g := &endpointauth.Guard{Reviewer: rv, Clock: clk, AllowTTL: time.Minute, DenyTTL: 10 * time.Second}
	h := g.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))

	for range 3 {
		code, _, _ := get(t, h, http.MethodGet, "/mesh", "Bearer reader")
		require.Equal(t, 200, code)
		code, _, _ = get(t, h, http.MethodGet, "/mesh", "Bearer other")
		require.Equal(t, 403, code)
	}
	require.Equal(t, 2, rv.reviews(), "one review per token while cached")

	clk.SetTime(clk.Now().Add(11 * time.Second))
	get(t, h, http.MethodGet, "/mesh", "Bearer reader")
	get(t, h, http.MethodGet, "/mesh", "Bearer other")
	require.Equal(t, 3, rv.reviews(), "the refusal expired, the grant did not")

	// The coordinator goes away: cached grants hold, new tokens get 503
	// and are asked about again next time.
	rv.mu.Lock()
	rv.err = errors.New("coordinator not connected")
	rv.mu.Unlock()
	code, _, _ := get(t, h, http.MethodGet, "/mesh", "Bearer reader")
	require.Equal(t, 200, code)
	for range 2 {
		code, body, hdr := get(t, h, http.MethodGet, "/inventory", "Bearer reader")
		require.Equal(t, 503, code)
		require.Contains(t, body, "cannot review the token now: coordinator not connected")
		require.Equal(t, "5", hdr.Get("Retry-After"))
	}
	require.Equal(t, 5, rv.reviews())

	clk.SetTime(clk.Now().Add(time.Minute))
	code, _, _ = get(t, h, http.MethodGet, "/mesh", "Bearer reader")
	require.Equal(t, 503, code, "an expired grant is reviewed again")
}

// TestProtectCacheBounded: the cache never holds more than CacheSize
// decisions.
func TestProtectCacheBounded(t *testing.T) {
	rv := &reviews{users: map[string]string{}}
	g := &endpointauth.Guard{Reviewer: rv, CacheSize: 4}
	h := g.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for i := range 20 {
		get(t, h, http.MethodGet, "/mesh", "Bearer t"+strings.Repeat("x", i))
	}
	require.LessOrEqual(t, g.Cached(), 4)
	require.Equal(t, 20, rv.reviews())
}
