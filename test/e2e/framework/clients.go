package framework

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shoal-io/shoal/internal/kubeclient"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Clients are the clients of the cluster under test. Its methods need no
// test namespace, so TestMain can use them as well as tests.
type Clients struct {
	// RESTConfig is the admin config built from the kubeconfig.
	RESTConfig *rest.Config
	// Kube is the core Kubernetes clientset.
	Kube kubernetes.Interface
	// Shoal is the clientset of Shoal's (OpenKruise-compatible) API.
	Shoal shoalclient.Interface
	// Dynamic serves any resource, including CRDs installed at run time.
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources from the server's discovery data. It
	// re-reads discovery when asked about a kind it does not know yet.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewClients builds the clients of the cluster named by cfg.Kubeconfig.
func NewClients(cfg *Config) (*Clients, error) {
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(cfg.Kubeconfig)}
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	restConfig.UserAgent = "shoal-e2e"
	// No client-side rate limit (a negative QPS): it would only slow tests
	// down, and near a wait's deadline it fails calls early with its own
	// error instead of the deadline's. The apiserver's flow control stays.
	restConfig.QPS = -1

	// Built-in types in protobuf, as the coordinator reads them: cheaper
	// for the apiserver that the tests poll.
	kube, err := kubernetes.NewForConfig(kubeclient.Protobuf(restConfig))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	shoal, err := shoalclient.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("shoal client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Clients{
		RESTConfig: restConfig,
		Kube:       kube,
		Shoal:      shoal,
		Dynamic:    dyn,
		Mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
	}, nil
}
