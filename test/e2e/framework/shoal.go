package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Names of the deployed Shoal (docs/dev/backbone.md).
const (
	// ShoalNamespace is where Shoal runs.
	ShoalNamespace = "shoal-system"
	// CoordinatorSelector selects coordinator pods.
	CoordinatorSelector = "app.kubernetes.io/name=shoal-coordinator"
	// AgentSelector selects agent pods.
	AgentSelector = "app.kubernetes.io/name=shoal-agent"
	// AgentMetricsPort is the agent's HTTP port on its node's address.
	AgentMetricsPort = "9480"
	// CoordinatorMetricsPort is the coordinator's HTTP port on its pod IP.
	CoordinatorMetricsPort = "8080"
)

// ShoalDeployed reports whether Shoal's DaemonSet exists, with a reason
// for a skip message when not.
func (c *Clients) ShoalDeployed(ctx context.Context) (bool, string, error) {
	_, err := c.Kube.AppsV1().DaemonSets(ShoalNamespace).Get(ctx, "shoal-agent", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "Shoal is not deployed (run: make deploy)", nil
	}
	if err != nil {
		return false, "", err
	}
	return true, "", nil
}

// CoordinatorLeader returns the pod holding the coordinator's Lease.
func (c *Clients) CoordinatorLeader(ctx context.Context) (*corev1.Pod, error) {
	lease, err := c.Kube.CoordinationV1().Leases(ShoalNamespace).Get(ctx, "shoal-coordinator", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get leader lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, fmt.Errorf("no coordinator holds the lease")
	}
	pod, err := c.Kube.CoreV1().Pods(ShoalNamespace).Get(ctx, *lease.Spec.HolderIdentity, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get leader pod %s: %w", *lease.Spec.HolderIdentity, err)
	}
	return pod, nil
}

// AgentPods returns the agent pods by node.
func (c *Clients) AgentPods(ctx context.Context) (map[string]corev1.Pod, error) {
	pods, err := c.Kube.CoreV1().Pods(ShoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
	if err != nil {
		return nil, fmt.Errorf("list agent pods: %w", err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out, nil
}

// AgentURL is the base URL of the agent on a node (hostNetwork).
func AgentURL(pod corev1.Pod) string {
	return "http://" + net.JoinHostPort(pod.Status.HostIP, AgentMetricsPort)
}

// CoordinatorURL is the base URL of a coordinator pod's HTTP endpoint.
func CoordinatorURL(pod *corev1.Pod) string {
	return "http://" + net.JoinHostPort(pod.Status.PodIP, CoordinatorMetricsPort)
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// GetJSON fetches url, with token as bearer token unless it is empty, and
// decodes its JSON body into v.
func GetJSON(ctx context.Context, url, token string, v any) error {
	body, err := getWithToken(ctx, url, token)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

func get(ctx context.Context, url string) ([]byte, error) {
	return getWithToken(ctx, url, "")
}

func getWithToken(ctx context.Context, url, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// AgentEndpointsReader is the ClusterRole (deploy/rbac.yaml) that grants
// reads of the agents' /inventory, /mesh and /debug/pprof/.
const AgentEndpointsReader = "shoal-agent-endpoints-reader"

// AgentEndpointToken returns a token of a ServiceAccount of the test's
// namespace: bound to AgentEndpointsReader when reader is true (the binding
// goes when the test ends), bound to nothing otherwise.
func (f *Framework) AgentEndpointToken(ctx context.Context, name string, reader bool) string {
	f.t.Helper()
	_, err := f.Kube.CoreV1().ServiceAccounts(f.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(f.t, err, "create ServiceAccount %s/%s", f.Namespace, name)
	if reader {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: f.Namespace + "-" + name, Labels: map[string]string{"e2e": "true"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AgentEndpointsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.Namespace, Name: name}},
		}
		_, err := f.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		require.NoError(f.t, err, "bind %s to ClusterRole %s", name, AgentEndpointsReader)
		f.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				f.t.Errorf("delete ClusterRoleBinding %s: %v", crb.Name, err)
			}
		})
	}
	tr, err := f.Kube.CoreV1().ServiceAccounts(f.Namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err, "token of ServiceAccount %s/%s", f.Namespace, name)
	return tr.Status.Token
}

// EndpointReaderToken is AgentEndpointToken of a reader ServiceAccount,
// made once per test.
func (f *Framework) EndpointReaderToken(ctx context.Context) string {
	f.readerMu.Lock()
	defer f.readerMu.Unlock()
	if f.readerToken == "" {
		f.readerToken = f.AgentEndpointToken(ctx, "agent-endpoints-reader", true)
	}
	return f.readerToken
}

// CoordinatorWrites reads the coordinator leader's API write counts
// (POST, PUT, PATCH and DELETE requests) by resource from its
// shoal_coordinator_api_requests_total; refused writes (conflicts and the
// like: tried, not written) count under "refused:<resource>".
func (c *Clients) CoordinatorWrites(ctx context.Context) (map[string]float64, error) {
	leader, err := c.CoordinatorLeader(ctx)
	if err != nil {
		return nil, err
	}
	m, err := Scrape(ctx, CoordinatorURL(leader))
	if err != nil {
		return nil, err
	}
	fam := m["shoal_coordinator_api_requests_total"]
	if fam == nil {
		return nil, fmt.Errorf("the coordinator %s exports no shoal_coordinator_api_requests_total", leader.Name)
	}
	out := map[string]float64{}
	for _, s := range fam.GetMetric() {
		var verb, res, code string
		for _, l := range s.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				res = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		if verb != "POST" && verb != "PUT" && verb != "PATCH" && verb != "DELETE" {
			continue
		}
		if !strings.HasPrefix(code, "2") {
			res = "refused:" + res
		}
		out[res] += s.GetCounter().GetValue()
	}
	return out, nil
}

// Metrics are the metric families of one scrape.
type Metrics map[string]*dto.MetricFamily

// Scrape reads a Prometheus text endpoint (base URL + /metrics).
func Scrape(ctx context.Context, baseURL string) (Metrics, error) {
	body, err := get(ctx, baseURL+"/metrics")
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse metrics of %s: %w", baseURL, err)
	}
	return fams, nil
}

// Value returns the value of the gauge or counter name whose labels include
// all of labels (summed over matching series), and whether any matched.
func (m Metrics) Value(name string, labels map[string]string) (float64, bool) {
	fam := m[name]
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
series:
	for _, s := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		found = true
		switch {
		case s.GetGauge() != nil:
			sum += s.GetGauge().GetValue()
		case s.GetCounter() != nil:
			sum += s.GetCounter().GetValue()
		case s.GetUntyped() != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum, found
}
