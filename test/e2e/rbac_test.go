//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The ServiceAccounts of Shoal's components (deploy/rbac.yaml).
const (
	agentServiceAccount       = "shoal-agent"
	coordinatorServiceAccount = "shoal-coordinator"
)

// TestRBAC pins the least-privilege RBAC of deploy/: the agent has no API
// permissions at all, the coordinator exactly what its work needs. It asks
// the API server with SubjectAccessReviews for each ServiceAccount (with the
// groups a real token of it carries) and needs Shoal's RBAC applied.
func TestRBAC(t *testing.T) {
	t.Parallel()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	cfg, err := framework.Load()
	require.NoError(t, err)
	c, err := framework.NewClients(cfg)
	require.NoError(t, err)
	ctx := t.Context()

	_, err = c.Kube.CoreV1().ServiceAccounts(shoalSystemNamespace).Get(ctx, agentServiceAccount, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Skipf("ServiceAccount %s/%s does not exist: Shoal is not deployed (make deploy)", shoalSystemNamespace, agentServiceAccount)
	}
	require.NoError(t, err)

	const (
		agent       = agentServiceAccount
		coordinator = coordinatorServiceAccount
		allNS       = "" // a cluster-wide request
	)
	type attrs = authorizationv1.ResourceAttributes
	tests := []struct {
		name    string
		sa      string
		attrs   attrs
		allowed bool
	}{
		// The agent: nothing.
		{"agent cannot get secrets in shoal-system", agent, attrs{Namespace: shoalSystemNamespace, Verb: "get", Resource: "secrets", Name: "shoal-mesh-key"}, false},
		{"agent cannot list secrets in shoal-system", agent, attrs{Namespace: shoalSystemNamespace, Verb: "list", Resource: "secrets"}, false},
		{"agent cannot list secrets cluster-wide", agent, attrs{Namespace: allNS, Verb: "list", Resource: "secrets"}, false},
		{"agent cannot list pods cluster-wide", agent, attrs{Namespace: allNS, Verb: "list", Resource: "pods"}, false},
		{"agent cannot list pods in shoal-system", agent, attrs{Namespace: shoalSystemNamespace, Verb: "list", Resource: "pods"}, false},
		{"agent cannot get nodes", agent, attrs{Verb: "get", Resource: "nodes", Name: "shoal-worker-1"}, false},
		{"agent cannot create tokenreviews", agent, attrs{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, false},
		{"agent cannot create subjectaccessreviews (the coordinator reviews endpoint tokens for it)", agent, attrs{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, false},
		{"agent cannot watch configmaps cluster-wide", agent, attrs{Namespace: allNS, Verb: "watch", Resource: "configmaps"}, false},
		{"agent cannot watch configmaps in shoal-system", agent, attrs{Namespace: shoalSystemNamespace, Verb: "watch", Resource: "configmaps"}, false},
		{"agent cannot watch configmaps in kube-system", agent, attrs{Namespace: "kube-system", Verb: "watch", Resource: "configmaps"}, false},
		{"agent cannot watch configmaps in default", agent, attrs{Namespace: "default", Verb: "watch", Resource: "configmaps"}, false},
		{"agent cannot read containerrecreaterequests", agent, attrs{Namespace: allNS, Verb: "list", Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, false},

		// The coordinator: what its work needs.
		{"coordinator can create tokenreviews", coordinator, attrs{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{"coordinator can create subjectaccessreviews (tokens sent to agent endpoints)", coordinator, attrs{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
		{"coordinator can list pods cluster-wide", coordinator, attrs{Namespace: allNS, Verb: "list", Resource: "pods"}, true},
		{"coordinator can patch pods", coordinator, attrs{Namespace: "default", Verb: "patch", Resource: "pods", Name: "any"}, true},
		{"coordinator can patch pods/status", coordinator, attrs{Namespace: "default", Verb: "patch", Resource: "pods", Subresource: "status", Name: "any"}, true},
		{"coordinator can watch nodes", coordinator, attrs{Verb: "watch", Resource: "nodes"}, true},
		{"coordinator can create events", coordinator, attrs{Namespace: "default", Verb: "create", Group: "events.k8s.io", Resource: "events"}, true},
		{"coordinator can get secret shoal-ca", coordinator, attrs{Namespace: shoalSystemNamespace, Verb: "get", Resource: "secrets", Name: "shoal-ca"}, true},
		{"coordinator can update secret shoal-ca", coordinator, attrs{Namespace: shoalSystemNamespace, Verb: "update", Resource: "secrets", Name: "shoal-ca"}, true},
		// ResourceDistributions write their copies wherever they target.
		{"coordinator can create secrets in default", coordinator, attrs{Namespace: "default", Verb: "create", Resource: "secrets"}, true},
		{"coordinator cannot patch secrets", coordinator, attrs{Namespace: "default", Verb: "patch", Resource: "secrets", Name: "any"}, false},
		// An ImagePullJob's pullSecrets are read where the job is, one by one.
		{"coordinator can get secrets in default", coordinator, attrs{Namespace: "default", Verb: "get", Resource: "secrets", Name: "any"}, true},
		{"coordinator can watch secrets cluster-wide (its ResourceDistribution copies, by label)", coordinator, attrs{Namespace: allNS, Verb: "watch", Resource: "secrets"}, true},
		{"coordinator can create imagepulljobs", coordinator, attrs{Namespace: "default", Verb: "create", Group: "apps.kruise.io", Resource: "imagepulljobs"}, true},
		{"coordinator can delete imagelistpulljobs", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps.kruise.io", Resource: "imagelistpulljobs", Name: "any"}, true},
		{"coordinator can watch namespaces", coordinator, attrs{Verb: "watch", Resource: "namespaces"}, true},
		{"coordinator can update its leader lease", coordinator, attrs{Namespace: shoalSystemNamespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "shoal-coordinator"}, true},
		{"coordinator cannot update leases in kube-system", coordinator, attrs{Namespace: "kube-system", Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "kube-scheduler"}, false},
		{"coordinator can update containerrecreaterequests/status", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps.kruise.io", Resource: "containerrecreaterequests", Subresource: "status", Name: "any"}, true},
		{"coordinator can delete containerrecreaterequests", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps.kruise.io", Resource: "containerrecreaterequests", Name: "any"}, true},
		{"coordinator can delete clonesets (a UnitedDeployment's subsets)", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps.kruise.io", Resource: "clonesets", Name: "any"}, true},
		{"coordinator cannot delete daemonsets", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps.kruise.io", Resource: "daemonsets", Name: "any"}, false},
		{"coordinator can watch clonesets", coordinator, attrs{Namespace: allNS, Verb: "watch", Group: "apps.kruise.io", Resource: "clonesets"}, true},
		{"coordinator cannot patch podunavailablebudgets/status (it updates status)", coordinator, attrs{Namespace: "default", Verb: "patch", Group: "policy.kruise.io", Resource: "podunavailablebudgets", Subresource: "status", Name: "any"}, false},
		// PodUnavailableBudgets: the workloads they count are only read;
		// any kind's replicas through its scale subresource.
		{"coordinator can update podunavailablebudgets/status", coordinator, attrs{Namespace: "default", Verb: "update", Group: "policy.kruise.io", Resource: "podunavailablebudgets", Subresource: "status", Name: "any"}, true},
		{"coordinator cannot update podunavailablebudgets", coordinator, attrs{Namespace: "default", Verb: "update", Group: "policy.kruise.io", Resource: "podunavailablebudgets", Name: "any"}, false},
		{"coordinator can watch deployments", coordinator, attrs{Namespace: allNS, Verb: "watch", Group: "apps", Resource: "deployments"}, true},
		{"coordinator can watch replicasets", coordinator, attrs{Namespace: allNS, Verb: "watch", Group: "apps", Resource: "replicasets"}, true},
		{"coordinator can get the scale of any workload", coordinator, attrs{Namespace: "default", Verb: "get", Group: "example.com", Resource: "widgets", Subresource: "scale", Name: "any"}, true},
		{"coordinator cannot update a scale", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Name: "any"}, false},
		// PersistentPodStates: generated from StatefulSet annotations,
		// deleted with them; upstream StatefulSets are only read.
		{"coordinator can create persistentpodstates", coordinator, attrs{Namespace: "default", Verb: "create", Group: "apps.kruise.io", Resource: "persistentpodstates"}, true},
		{"coordinator can update persistentpodstates", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps.kruise.io", Resource: "persistentpodstates", Name: "any"}, true},
		{"coordinator can delete persistentpodstates", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps.kruise.io", Resource: "persistentpodstates", Name: "any"}, true},
		{"coordinator can update persistentpodstates/status", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps.kruise.io", Resource: "persistentpodstates", Subresource: "status", Name: "any"}, true},
		{"coordinator can watch apps statefulsets", coordinator, attrs{Namespace: allNS, Verb: "watch", Group: "apps", Resource: "statefulsets"}, true},
		{"coordinator can update apps statefulsets (a UnitedDeployment's subsets)", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps", Resource: "statefulsets", Name: "any"}, true},
		{"coordinator can delete apps deployments (a UnitedDeployment's subsets)", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps", Resource: "deployments", Name: "any"}, true},
		{"coordinator cannot delete apps replicasets", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps", Resource: "replicasets", Name: "any"}, false},
		{"coordinator cannot delete apps daemonsets", coordinator, attrs{Namespace: "default", Verb: "delete", Group: "apps", Resource: "daemonsets", Name: "any"}, false},
		{"coordinator can update webhook shoal-validating", coordinator, attrs{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "shoal-validating"}, true},
		{"coordinator cannot update other webhooks", coordinator, attrs{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "other"}, false},
		{"coordinator cannot delete nodes", coordinator, attrs{Verb: "delete", Resource: "nodes", Name: "shoal-worker-1"}, false},
		// Verbs no code uses are not granted (docs/dev/rbac.md).
		{"coordinator cannot get a node (it reads nodes from its informer)", coordinator, attrs{Verb: "get", Resource: "nodes", Name: "shoal-worker-1"}, false},
		{"coordinator cannot create core events (it records events.k8s.io events)", coordinator, attrs{Namespace: "default", Verb: "create", Resource: "events"}, false},
		{"coordinator cannot patch clonesets/status (it updates status)", coordinator, attrs{Namespace: "default", Verb: "patch", Group: "apps.kruise.io", Resource: "clonesets", Subresource: "status", Name: "any"}, false},
		{"coordinator can update controllerrevisions (renumbering a taken-over revision)", coordinator, attrs{Namespace: "default", Verb: "update", Group: "apps", Resource: "controllerrevisions", Name: "any"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := serviceaccount.MakeUsername(shoalSystemNamespace, tt.sa)
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user,
				Groups:             append(serviceaccount.MakeGroupNames(shoalSystemNamespace), "system:authenticated"),
				ResourceAttributes: &tt.attrs,
			}}
			got, err := c.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			require.NoError(t, err)
			require.Equal(t, tt.allowed, got.Status.Allowed,
				"%s %s: allowed=%t denied=%t reason=%q error=%q", user, describeAttrs(tt.attrs), got.Status.Allowed, got.Status.Denied, got.Status.Reason, got.Status.EvaluationError)
		})
	}

	t.Run("agent has no role bindings", func(t *testing.T) {
		// A binding to the agent, or to a group that holds it, would give
		// it permissions the table above may not ask about.
		agentSubject := func(s rbacSubject) bool {
			switch s.Kind {
			case "ServiceAccount":
				return s.Name == agentServiceAccount && s.Namespace == shoalSystemNamespace
			case "User":
				return s.Name == serviceaccount.MakeUsername(shoalSystemNamespace, agentServiceAccount)
			case "Group":
				return s.Name == serviceaccount.MakeNamespaceGroupName(shoalSystemNamespace)
			}
			return false
		}
		crbs, err := c.Kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, b := range crbs.Items {
			for _, s := range b.Subjects {
				require.False(t, agentSubject(rbacSubject{s.Kind, s.Name, s.Namespace}), "ClusterRoleBinding %s binds %s %s", b.Name, s.Kind, s.Name)
			}
		}
		rbs, err := c.Kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, b := range rbs.Items {
			for _, s := range b.Subjects {
				require.False(t, agentSubject(rbacSubject{s.Kind, s.Name, s.Namespace}), "RoleBinding %s/%s binds %s %s", b.Namespace, b.Name, s.Kind, s.Name)
			}
		}
	})
}

// rbacSubject is the part of an rbacv1.Subject the binding check reads.
type rbacSubject struct{ Kind, Name, Namespace string }

// describeAttrs renders a as "verb group/resource/subresource name in ns".
func describeAttrs(a authorizationv1.ResourceAttributes) string {
	r := a.Resource
	if a.Group != "" {
		r = a.Group + "/" + r
	}
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	s := fmt.Sprintf("%s %s", a.Verb, r)
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in " + a.Namespace
	} else {
		s += " cluster-wide"
	}
	return s
}
