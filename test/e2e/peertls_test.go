//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// agentP2PPort is the agents' swarm port (--p2p-port).
const agentP2PPort = "30020"

// peerGet asks an agent's swarm endpoint for a blob with client and
// returns the status and body (at most 1 MiB of it), or the request's
// error.
func peerGet(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// TestPeerBlobsNeedAgentCertificate: an agent that holds the layers of a
// private image (pulled with a pull secret) serves them to its peers only:
// over plain HTTP, over TLS without a client certificate (401) and with a
// client certificate from another CA (403), not one byte of the layer
// comes back. Meanwhile a second node warms the same image and gets its
// pieces from its peers, over the agents' mutual TLS.
//
// The refused clients run in the test process, which reaches the nodes'
// addresses as a pod of the cluster network would.
func TestPeerBlobsNeedAgentCertificate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	if len(nodes) < 2 {
		t.Skipf("needs 2 nodes to share an image, the cluster has %d", len(nodes))
	}
	user, pass := "peer-tls", randomSecret(t)
	reg := framework.StartRegistry(t, framework.RegistryOptions{Users: map[string]string{user: pass}})
	ref := reg.Push(t, "private/app", "v1", 4, 2)
	pushed, _ := reg.Pushed(ref)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", reg.Host, user, pass, false))
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)

	holder, other := nodes[0].Name, nodes[1].Name
	warm := func(job, node string) {
		t.Helper()
		createPullJob(ctx, t, f, pullJob(job, ref, func(j *v1alpha1.ImagePullJob) {
			j.Spec.PullSecrets = []string{"pull-secret"}
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{node}}
			setPull(&j.Spec.ImagePullJobTemplate, 1, 120, 2)
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always}
		}))
		done := waitPullJob(ctx, t, f, job, 3*time.Minute, "completed", isComplete)
		require.Equal(t, int32(1), done.Status.Succeeded, pullJobState(done))
	}
	warm("holder", holder)

	agent := agents[holder]
	layer, size := pushed.Layers[0], pushed.LayerSizes[0]
	path := "/v2/private/app/blobs/" + layer
	host := net.JoinHostPort(agent.Status.HostIP, agentP2PPort)
	refusedBefore := map[string]float64{}
	refused := func(result string) float64 {
		return agentMetric(ctx, t, agent, "shoal_agent_peer_tls_requests_total", map[string]string{"result": result})
	}
	for _, r := range []string{"no_certificate", "bad_certificate"} {
		refusedBefore[r] = refused(r)
	}
	otherCA, err := peertlstest.NewCA("not-the-cluster")
	require.NoError(t, err)
	foreign, err := otherCA.ClientCert(holder)
	require.NoError(t, err)
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		// The client does not check the agent's certificate: what is
		// tested is the agent's check of the client.
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs, MinVersion: tls.VersionTLS13}, //nolint:gosec // see above
		}}
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
		status int
		says   string
	}{
		{"plain HTTP", &http.Client{Timeout: 10 * time.Second}, "http://" + host + path, http.StatusBadRequest, "HTTPS"},
		{"TLS without a client certificate", tlsClient(), "https://" + host + path, http.StatusUnauthorized, "client certificate"},
		{"a client certificate from another CA", tlsClient(foreign), "https://" + host + path, http.StatusForbidden, "client certificate refused"},
	} {
		status, body, err := peerGet(ctx, tc.client, tc.url)
		require.NoError(t, err, tc.name)
		t.Logf("%s: %d %q", tc.name, status, bytes.TrimSpace(body))
		require.Equal(t, tc.status, status, "%s: %s", tc.name, body)
		require.Contains(t, string(body), tc.says, tc.name)
		require.Less(t, int64(len(body)), size, "%s: the answer is as long as the layer", tc.name)
		require.NotContains(t, string(body), "sha256:", "%s: the answer names content", tc.name)
	}
	require.Equal(t, refusedBefore["no_certificate"]+1, refused("no_certificate"))
	require.Equal(t, refusedBefore["bad_certificate"]+1, refused("bad_certificate"))

	// The agents themselves still swarm the layer.
	peerPieces := func(node string) float64 {
		return agentMetric(ctx, t, agents[node], "shoal_agent_swarm_pieces_total", map[string]string{"source": "peer"})
	}
	before := peerPieces(other)
	warm("other", other)
	got := peerPieces(other) - before
	byNode := layerBytesTo(t, reg, ref, []corev1.Node{nodes[0], nodes[1]})
	t.Logf("%s warmed %s: %.0f pieces from peers over TLS; registry layer bytes by node %v (image %d bytes)",
		other, ref, got, byNode, pushed.Size())
	require.Positive(t, got, fmt.Sprintf("%s got no piece from its peers", other))
}
