// Package kubeclient holds how Shoal's processes talk to the apiserver.
package kubeclient

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Protobuf returns a copy of cfg that sends and accepts Kubernetes'
// protobuf encoding, falling back to JSON, as kube-controller-manager and
// the kubelet do. Use it for clientsets of the built-in types only:
// custom resources (Shoal's kinds) and the dynamic client speak JSON.
//
// The apiserver encodes each watch event once per encoding and shares it
// among the watchers of that encoding. Its own components watch pods in
// protobuf, so a JSON watcher costs a second encoding of every pod change,
// and JSON is several times dearer to encode and to decode.
func Protobuf(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = runtime.ContentTypeProtobuf
	out.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return out
}
