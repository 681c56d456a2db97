package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// env is how the commands reach the cluster and tell the time. The plugin
// uses defaultEnv; tests put fakes in its place.
type env struct {
	// clients returns the Shoal and Kubernetes clients of the kubeconfig
	// and the namespace of its context.
	clients func(g *globalOptions) (shoalclient.Interface, kubernetes.Interface, string, error)
	// dynamic returns a dynamic client of the kubeconfig (for kinds Shoal
	// does not serve, such as Kruise Rollout's) and its context's
	// namespace.
	dynamic func(g *globalOptions) (dynamic.Interface, string, error)
	// proxyGet GETs path from the port named port of the Service
	// namespace/service, through the apiserver's service proxy.
	proxyGet func(ctx context.Context, kube kubernetes.Interface, namespace, service, port, path string) ([]byte, error)
	// now tells the time (for AGE).
	now func() time.Time
	// refresh is how often `get -w` reads again.
	refresh time.Duration
}

// defaultEnv is the plugin's environment: the kubeconfig's cluster and the
// real clock.
func defaultEnv() env {
	return env{clients: kubeconfigClients, dynamic: kubeconfigDynamic, proxyGet: serviceProxyGet, now: time.Now, refresh: 2 * time.Second}
}

// kubeconfigDynamic returns a dynamic client of the kubeconfig's cluster
// and the context's namespace.
func kubeconfigDynamic(g *globalOptions) (dynamic.Interface, string, error) {
	cfg, ns, err := loadConfig(g)
	if err != nil {
		return nil, "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return dyn, ns, nil
}

// kubeconfigClients returns clients of the cluster the kubeconfig and
// --context name, and the context's namespace.
func kubeconfigClients(g *globalOptions) (shoalclient.Interface, kubernetes.Interface, string, error) {
	cfg, ns, err := loadConfig(g)
	if err != nil {
		return nil, nil, "", err
	}
	shoal, err := shoalclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return shoal, kube, ns, nil
}

// serviceProxyGet GETs path from a Service's port through the apiserver.
// An error the apiserver itself answered (a Status object: no such
// Service, no endpoints) is returned as that Status; an error answer of
// the Service's pod stays an unexpected server response, whose cause holds
// the answer's text.
func serviceProxyGet(ctx context.Context, kube kubernetes.Interface, namespace, service, port, path string) ([]byte, error) {
	body, err := kube.CoreV1().Services(namespace).ProxyGet("http", service, port, path, nil).DoRaw(ctx)
	if err == nil {
		return body, nil
	}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		return nil, &apierrors.StatusError{ErrStatus: st}
	}
	return nil, err
}
