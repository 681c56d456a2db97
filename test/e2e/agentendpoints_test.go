//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// endpointAnswer is one GET of an agent endpoint: status and body.
type endpointAnswer struct {
	code int
	body string
}

// getEndpoint GETs url with token ("" sends none).
func getEndpoint(ctx context.Context, t *testing.T, url, token string) endpointAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err, "GET %s", url)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	require.NoError(t, err)
	return endpointAnswer{code: resp.StatusCode, body: string(body)}
}

// TestAgentEndpointsNeedToken: the agent's /inventory and /mesh answer
// 401 without a token or with a token the apiserver does not know, 403 to
// a ServiceAccount without the ClusterRole shoal-agent-endpoints-reader,
// and 200 with the node's inventory to one bound to it. /metrics stays
// open. The agent has no API access of its own: the coordinator reviews
// each token for it.
func TestAgentEndpointsNeedToken(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	node := requireSchedulableNodes(ctx, t, f, 1)[0].Name
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	agent, ok := agents[node]
	require.True(t, ok, "no agent on node %s", node)
	base := framework.AgentURL(agent)

	noRole := f.AgentEndpointToken(ctx, "no-role", false)
	reader := f.AgentEndpointToken(ctx, "reader", true)

	for _, path := range []string{"/inventory", "/mesh"} {
		a := getEndpoint(ctx, t, base+path, "")
		require.Equal(t, http.StatusUnauthorized, a.code, "%s without a token: %s", path, a.body)
		require.Contains(t, a.body, "send a Kubernetes bearer token")
		t.Logf("GET %s without a token: %d %s", path, a.code, a.body)

		a = getEndpoint(ctx, t, base+path, "not-a-token")
		require.Equal(t, http.StatusUnauthorized, a.code, "%s with a forged token: %s", path, a.body)

		a = getEndpoint(ctx, t, base+path, noRole)
		require.Equal(t, http.StatusForbidden, a.code, "%s with a token without the ClusterRole: %s", path, a.body)
		require.Contains(t, a.body, "system:serviceaccount:"+f.Namespace+":no-role")
		t.Logf("GET %s, token without the ClusterRole: %d %s", path, a.code, a.body)
	}

	// The binding may take a moment to reach the authorizer, and a refusal
	// is cached for 10 s: poll, bounded.
	var last endpointAnswer
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		last = getEndpoint(ctx, t, base+"/inventory", reader)
		return last.code == http.StatusOK, nil
	})
	require.NoError(t, err, "GET /inventory with the reader's token: last %d %s", last.code, last.body)
	var inv cri.Inventory
	require.NoError(t, json.Unmarshal([]byte(last.body), &inv))
	require.NotEmpty(t, inv.Pods, "the inventory of node %s lists its pods", node)
	t.Logf("GET /inventory with the reader's token: 200, %d pods", len(inv.Pods))

	a := getEndpoint(ctx, t, base+"/mesh", reader)
	require.Equal(t, http.StatusOK, a.code, a.body)

	// Prometheus scrapes without a token, as it does node exporters.
	a = getEndpoint(ctx, t, base+"/metrics", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Contains(t, a.body, "shoal_agent_endpoint_requests_total")
	m, err := framework.Scrape(ctx, base)
	require.NoError(t, err)
	for _, result := range []string{"unauthenticated", "forbidden", "allowed"} {
		v, _ := m.Value("shoal_agent_endpoint_requests_total", map[string]string{"result": result})
		require.Positive(t, v, "requests answered %s", result)
	}
}
