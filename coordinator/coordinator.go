// Package coordinator assembles shoal-coordinator: informers, leader
// election, the node-work gRPC server, the admission webhook server, the
// coordinator's own CA, the batched status writer and the metrics/health
// endpoint. Every replica keeps warm informers and serves webhooks; only the
// leader serves agents and makes decisions.
package coordinator

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/advancedcronjob"
	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/coordinator/broadcastjob"
	"github.com/shoal-io/shoal/coordinator/certs"
	"github.com/shoal-io/shoal/coordinator/cloneset"
	"github.com/shoal-io/shoal/coordinator/daemonset"
	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/imagelistpull"
	"github.com/shoal-io/shoal/coordinator/imagepull"
	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/coordinator/launchpriority"
	"github.com/shoal-io/shoal/coordinator/persistentpodstate"
	"github.com/shoal-io/shoal/coordinator/podprobemarker"
	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/coordinator/podreadiness"
	"github.com/shoal-io/shoal/coordinator/podunavailablebudget"
	"github.com/shoal-io/shoal/coordinator/recreate"
	"github.com/shoal-io/shoal/coordinator/resourcedistribution"
	"github.com/shoal-io/shoal/coordinator/sidecarset"
	"github.com/shoal-io/shoal/coordinator/sidecarterminator"
	"github.com/shoal-io/shoal/coordinator/statefulset"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/testwork"
	"github.com/shoal-io/shoal/coordinator/uniteddeployment"
	"github.com/shoal-io/shoal/coordinator/webhook"
	"github.com/shoal-io/shoal/coordinator/workloadspread"
	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/internal/apimetrics"
	"github.com/shoal-io/shoal/internal/httpserve"
	"github.com/shoal-io/shoal/internal/kubeclient"
	"github.com/shoal-io/shoal/internal/queuemetrics"
	"github.com/shoal-io/shoal/protocol/apis/apps/conversion"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	shoalscheme "github.com/shoal-io/shoal/protocol/client/clientset/versioned/scheme"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// Names shared with deploy/ (docs/dev/backbone.md).
const (
	// LeaderLabel marks the leader's pod; the shoal-coordinator Service
	// selects it so agents reach only the leader.
	LeaderLabel = "shoal.io/leader"
	// LeaseName is the leader-election Lease.
	LeaseName = "shoal-coordinator"
	// GRPCService and WebhookService name the Services in front of the
	// coordinator; the serving certificate carries both.
	GRPCService    = "shoal-coordinator"
	WebhookService = "shoal-webhook"
)

// placeTimeout bounds how long a new leader waits for its controllers to
// place the node work of what they listed before agents can reach it.
const placeTimeout = 10 * time.Second

// Options are the coordinator's flags.
type Options struct {
	// Namespace is where the coordinator runs and keeps its Secrets.
	Namespace string
	// PodName is this replica's pod (leader identity and label target).
	PodName string
	// Kubeconfig is a kubeconfig path; empty means in-cluster.
	Kubeconfig string
	// GRPCAddr, WebhookAddr and MetricsAddr are listen addresses.
	GRPCAddr, WebhookAddr, MetricsAddr string
	// AgentAudience is the audience of agents' projected tokens.
	AgentAudience string
	// AgentServiceAccount is "namespace:name" of the agents' ServiceAccount.
	AgentServiceAccount string
	// EnableTestWork turns on the test-only noop work source.
	EnableTestWork bool
	// KruisePodReadinessGate is OpenKruise's option of the same name: the
	// pod webhook (PodMutatePath, registered by the optional
	// MutatingWebhookConfiguration shoal-pods) adds the KruisePodReady
	// readiness gate to every pod created. Off by default.
	KruisePodReadinessGate bool
	// Features are the feature gates (package features); nil is their
	// defaults.
	Features featuregate.FeatureGate
	// Profiling serves Go's runtime profiles under /debug/pprof/ on MetricsAddr.
	Profiling bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// PeerCertValidity is the lifetime of the agents' peer certificates
	// (0: peertls.DefaultValidity); agents renew after two thirds of it.
	PeerCertValidity time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the coordinator's requests to the
	// apiserver (0: 50 and 100). Events go through a client of their own
	// with the same bounds, so they never delay the writes that matter.
	KubeAPIQPS   float32
	KubeAPIBurst int
}

// Run runs the coordinator until ctx ends.
func Run(ctx context.Context, o Options) error {
	log := klog.FromContext(ctx)
	cfg, err := restConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	apiRequests, err := apimetrics.New("shoal_coordinator", reg)
	if err != nil {
		return fmt.Errorf("register API request metrics: %w", err)
	}
	apiRequests.Instrument(cfg)
	// Before any controller makes its queue.
	if err := queuemetrics.Register("shoal_coordinator", reg); err != nil {
		return fmt.Errorf("register work queue metrics: %w", err)
	}
	// Built-in types in protobuf (kubeclient.Protobuf); Shoal's own kinds,
	// CRDs and the dynamic client in JSON.
	client, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	shoal, err := shoalclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("shoal client: %w", err)
	}

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// A restarted container keeps its pod's labels: drop a stale leader
	// label before anything else so the Service never selects a follower.
	labelLeader(ctx, client, o, false)

	var leading atomic.Bool
	isLeader := leading.Load

	authority := &certs.Authority{Client: client, Namespace: o.Namespace}
	certManager, err := certs.NewManager(authority, isLeader, reg)
	if err != nil {
		return err
	}
	// The CRDs that convert between v1alpha1 and v1beta1 through this
	// coordinator's webhook trust its CA too.
	if certManager.CRDClient, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	certManager.CRDs = conversion.CRDNames()
	serving := certs.NewServing(append(certs.DNSNames(GRPCService, o.Namespace), certs.DNSNames(WebhookService, o.Namespace)...), clock.RealClock{})
	if err := certManager.Register(serving); err != nil {
		return err
	}

	kubeInformers := kubeinformers.NewSharedInformerFactory(client, 0)
	podInformer := kubeInformers.Core().V1().Pods().Informer()
	nodeInformer := kubeInformers.Core().V1().Nodes().Informer()
	shoalInformers := shoalinformers.NewSharedInformerFactory(shoal, 0)
	synced := []cache.InformerSynced{podInformer.HasSynced, nodeInformer.HasSynced}
	for _, inf := range kruiseInformers(shoalInformers) {
		synced = append(synced, inf.HasSynced)
	}

	writer, err := statuswriter.New(statuswriter.Options{Registerer: reg})
	if err != nil {
		return err
	}
	store := dispatch.NewStore()
	authenticator := &auth.Authenticator{Client: client, Audience: o.AgentAudience, ServiceAccount: o.AgentServiceAccount}
	server := dispatch.NewServer(dispatch.ServerOptions{Store: store, Auth: authenticator, Access: &auth.AccessReviewer{Client: client},
		PeerSigner: &certs.PeerSigner{Manager: certManager, Validity: o.PeerCertValidity}, IsLeader: isLeader, Name: o.PodName, Registerer: reg})

	scheme := runtime.NewScheme()
	if err := errors.Join(kubescheme.AddToScheme(scheme), shoalscheme.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("event scheme: %w", err)
	}
	// Events have a client (and rate limiter) of their own.
	eventClient, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
	if err != nil {
		return fmt.Errorf("kubernetes client for events: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, "shoal-coordinator")

	crrs, err := recreate.New(recreate.Options{
		Client: client, Shoal: shoal,
		Requests: shoalInformers.Apps().V1alpha1().ContainerRecreateRequests().Informer(), Pods: podInformer,
		Store: store, Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	if err != nil {
		return err
	}
	synced = append(synced, crrs.HasSynced)

	sets, err := cloneset.New(cloneset.Options{
		Client: client, Shoal: shoal,
		CloneSets: shoalInformers.Apps().V1beta1().CloneSets().Informer(), Pods: podInformer,
		Revisions: kubeInformers.Apps().V1().ControllerRevisions().Informer(),
		Jobs:      shoalInformers.Apps().V1alpha1().ImagePullJobs().Informer(),
		Claims:    kubeInformers.Core().V1().PersistentVolumeClaims().Informer(),
		Nodes:     nodeInformer,
		IsLeader:  isLeader, Recorder: recorder, Features: o.Features,
	})
	if err != nil {
		return err
	}
	synced = append(synced, sets.HasSynced)

	daemons, err := daemonset.New(daemonset.Options{
		Client: client, Shoal: shoal,
		DaemonSets: shoalInformers.Apps().V1beta1().DaemonSets().Informer(), Pods: podInformer, Nodes: nodeInformer,
		Revisions: kubeInformers.Apps().V1().ControllerRevisions().Informer(),
		Jobs:      shoalInformers.Apps().V1alpha1().ImagePullJobs().Informer(),
		IsLeader:  isLeader, Recorder: recorder, Features: o.Features,
	})
	if err != nil {
		return err
	}
	synced = append(synced, daemons.HasSynced)

	statefulSets, err := statefulset.New(statefulset.Options{
		Client: client, Shoal: shoal,
		StatefulSets: shoalInformers.Apps().V1beta1().StatefulSets().Informer(), Pods: podInformer,
		Revisions: kubeInformers.Apps().V1().ControllerRevisions().Informer(),
		Claims:    kubeInformers.Core().V1().PersistentVolumeClaims().Informer(),
		Jobs:      shoalInformers.Apps().V1alpha1().ImagePullJobs().Informer(),
		IsLeader:  isLeader, Recorder: recorder, Features: o.Features,
	})
	if err != nil {
		return err
	}
	synced = append(synced, statefulSets.HasSynced)

	// ResourceDistribution copies: only the labelled Secrets and ConfigMaps.
	copyInformers := kubeinformers.NewSharedInformerFactoryWithOptions(client, 0,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = wellknown.LabelResourceDistribution }))
	distributions, err := resourcedistribution.New(resourcedistribution.Options{
		Client: client, Shoal: shoal,
		Distributions: shoalInformers.Apps().V1alpha1().ResourceDistributions().Informer(),
		Namespaces:    kubeInformers.Core().V1().Namespaces().Informer(),
		Secrets:       copyInformers.Core().V1().Secrets().Informer(),
		ConfigMaps:    copyInformers.Core().V1().ConfigMaps().Informer(),
		IsLeader:      isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, distributions.HasSynced)

	// Custom workload kinds (white-listed in kruise-configuration) are
	// read through the dynamic client.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	// The kruise-configuration ConfigMap alone, in the coordinator's
	// namespace.
	configInformers := kubeinformers.NewSharedInformerFactoryWithOptions(client, 0, kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", wellknown.ConfigMapKruiseConfiguration).String()
		}))

	// PersistentPodStates at their storage version (v1alpha1); Advanced
	// StatefulSets at theirs (v1beta1); white-listed StatefulSet-like
	// kinds as the list says.
	ppsInformer := shoalInformers.Apps().V1alpha1().PersistentPodStates()
	podStates, err := persistentpodstate.New(persistentpodstate.Options{
		Shoal:  shoal,
		States: ppsInformer.Informer(), Pods: podInformer, Nodes: nodeInformer,
		StatefulSets:         kubeInformers.Apps().V1().StatefulSets().Informer(),
		AdvancedStatefulSets: shoalInformers.Apps().V1beta1().StatefulSets().Informer(),
		IsLeader:             isLeader, Recorder: recorder,
		Config: configInformers.Core().V1().ConfigMaps().Informer(), Dynamic: dyn, Mapper: mapper,
	})
	if err != nil {
		return err
	}
	synced = append(synced, podStates.HasSynced)

	// PodUnavailableBudgets; the workloads they count from the informers
	// (CloneSets and Advanced StatefulSets at their storage version), any
	// other kind through its scale subresource.
	scales, err := podunavailablebudget.NewScales(cfg)
	if err != nil {
		return err
	}
	budgets, err := podunavailablebudget.New(podunavailablebudget.Options{
		Shoal:   shoal,
		Budgets: shoalInformers.Policy().V1alpha1().PodUnavailableBudgets().Informer(), Pods: podInformer,
		ReplicaSets:          kubeInformers.Apps().V1().ReplicaSets().Informer(),
		Deployments:          kubeInformers.Apps().V1().Deployments().Informer(),
		StatefulSets:         kubeInformers.Apps().V1().StatefulSets().Informer(),
		CloneSets:            shoalInformers.Apps().V1beta1().CloneSets().Informer(),
		AdvancedStatefulSets: shoalInformers.Apps().V1beta1().StatefulSets().Informer(),
		Scales:               scales, IsLeader: isLeader, Recorder: recorder,
		// A budget that frees room lets Shoal's workloads retry the pod
		// updates and deletes it refused at once.
		OnFreed: podunavailablebudget.Requeue(&sets.Loop, &statefulSets.Loop, &daemons.Loop),
	})
	if err != nil {
		return err
	}
	synced = append(synced, budgets.HasSynced)

	// WorkloadSpread targets of white-listed custom kinds are read through
	// the dynamic client (their replicasPath).
	customWorkloads := customWorkloadReader(client, dyn, o.Namespace, mapper)
	spreads, err := workloadspread.New(workloadspread.Options{
		CustomWorkload: customWorkloads,
		Shoal:          shoal, Kube: client,
		WorkloadSpreads: shoalInformers.Apps().V1alpha1().WorkloadSpreads().Informer(),
		Pods:            podInformer, Nodes: nodeInformer,
		ReplicaSets:          kubeInformers.Apps().V1().ReplicaSets().Informer(),
		Deployments:          kubeInformers.Apps().V1().Deployments().Informer(),
		StatefulSets:         kubeInformers.Apps().V1().StatefulSets().Informer(),
		Jobs:                 kubeInformers.Batch().V1().Jobs().Informer(),
		CloneSets:            shoalInformers.Apps().V1beta1().CloneSets().Informer(),
		AdvancedStatefulSets: shoalInformers.Apps().V1beta1().StatefulSets().Informer(),
		Scales:               scales, IsLeader: isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, spreads.HasSynced)

	united, err := uniteddeployment.New(uniteddeployment.Options{
		Dynamic: dyn, Shoal: shoal, Kube: client, Pods: podInformer,
		UnitedDeployments:    shoalInformers.Apps().V1alpha1().UnitedDeployments().Informer(),
		StatefulSets:         kubeInformers.Apps().V1().StatefulSets().Informer(),
		AdvancedStatefulSets: shoalInformers.Apps().V1beta1().StatefulSets().Informer(),
		CloneSets:            shoalInformers.Apps().V1beta1().CloneSets().Informer(),
		Deployments:          kubeInformers.Apps().V1().Deployments().Informer(),
		IsLeader:             isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, united.HasSynced)

	// Constructed before the gRPC server starts: it registers its report
	// handler on the work store.
	terminator, err := sidecarterminator.New(sidecarterminator.Options{
		Client: client, Pods: podInformer, Nodes: nodeInformer, Store: store,
		IsLeader: isLeader, Recorder: recorder, Registerer: reg,
		Disabled: !features.Enabled(o.Features, features.SidecarTerminator),
	})
	if err != nil {
		return err
	}
	synced = append(synced, terminator.HasSynced)

	probeMarkers, err := podprobemarker.New(podprobemarker.Options{
		Client: client, Shoal: shoal,
		Markers: shoalInformers.Apps().V1alpha1().PodProbeMarkers().Informer(), Pods: podInformer,
		Store: store, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	if err != nil {
		return err
	}
	synced = append(synced, probeMarkers.HasSynced)

	sidecarSets, err := sidecarset.New(sidecarset.Options{
		Client: client, Shoal: shoal,
		SidecarSets: shoalInformers.Apps().V1beta1().SidecarSets().Informer(), Pods: podInformer,
		Namespaces: kubeInformers.Core().V1().Namespaces().Informer(),
		Revisions:  kubeInformers.Apps().V1().ControllerRevisions().Informer(),
		Namespace:  o.Namespace, IsLeader: isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, sidecarSets.HasSynced)

	launches, err := launchpriority.New(launchpriority.Options{Client: client, Pods: podInformer, IsLeader: isLeader})
	if err != nil {
		return err
	}
	synced = append(synced, launches.HasSynced)

	cronJobs, err := advancedcronjob.New(advancedcronjob.Options{
		Client: client, Shoal: shoal,
		CronJobs:          shoalInformers.Apps().V1beta1().AdvancedCronJobs().Informer(),
		Jobs:              kubeInformers.Batch().V1().Jobs().Informer(),
		BroadcastJobs:     shoalInformers.Apps().V1beta1().BroadcastJobs().Informer(),
		ImageListPullJobs: shoalInformers.Apps().V1alpha1().ImageListPullJobs().Informer(),
		IsLeader:          isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, cronJobs.HasSynced)

	bcj, err := broadcastjob.New(broadcastjob.Options{
		Client: client, Shoal: shoal,
		Jobs: shoalInformers.Apps().V1beta1().BroadcastJobs().Informer(), Pods: podInformer, Nodes: nodeInformer,
		IsLeader: isLeader, Recorder: recorder,
	})
	if err != nil {
		return err
	}
	synced = append(synced, bcj.HasSynced)

	readiness, err := podreadiness.New(podreadiness.Options{Client: client, Pods: podInformer, IsLeader: isLeader, Registerer: reg})
	if err != nil {
		return err
	}
	synced = append(synced, readiness.HasSynced)

	pulls, err := imagepull.New(imagepull.Options{
		Client: client, Shoal: shoal,
		Jobs: shoalInformers.Apps().V1alpha1().ImagePullJobs().Informer(), Nodes: nodeInformer, Pods: podInformer,
		Store: store, Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	if err != nil {
		return err
	}
	synced = append(synced, pulls.HasSynced)
	lists, err := imagelistpull.New(imagelistpull.Options{
		Shoal:  shoal,
		Lists:  shoalInformers.Apps().V1alpha1().ImageListPullJobs().Informer(),
		Jobs:   shoalInformers.Apps().V1alpha1().ImagePullJobs().Informer(),
		Writer: writer, IsLeader: isLeader, Recorder: recorder, Registerer: reg,
	})
	if err != nil {
		return err
	}
	synced = append(synced, lists.HasSynced)

	var nsInformers kubeinformers.SharedInformerFactory
	if o.EnableTestWork {
		nsInformers = kubeinformers.NewSharedInformerFactoryWithOptions(client, 0, kubeinformers.WithNamespace(o.Namespace),
			kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = testwork.LabelNoop + "=true" }))
		cmInformer := nsInformers.Core().V1().ConfigMaps().Informer()
		tw, err := testwork.New(client, cmInformer, store, writer)
		if err != nil {
			return err
		}
		// The handler's own sync, not the informer's: a new leader must not
		// send agents a WorkSync before the store holds every item.
		synced = append(synced, tw.HasSynced)
		log.Info("Test work enabled: noop ConfigMaps become work items", "label", testwork.LabelNoop)
	}

	hooks := webhook.NewServer(serving.GetCertificate, reg)
	hooks.Handle(webhook.SelectorsPath, webhook.ValidateSelectors)
	// Admission reads the pod live: a container that has just started may
	// not have its ID in the informer's copy yet.
	livePods := webhook.PodGetterFunc(func(namespace, name string) (*corev1.Pod, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	crrAdmission := webhook.NewCRRAdmission(livePods).WithNodes(nodeGetter{kubeInformers.Core().V1().Nodes().Lister()})
	hooks.Handle(webhook.CRRMutatePath, crrAdmission.Mutate)
	hooks.Handle(webhook.CRRValidatePath, crrAdmission.Validate)
	hooks.Handle(webhook.ImagePullJobMutatePath, webhook.MutateImagePullJob)
	hooks.Handle(webhook.ImagePullJobValidatePath, webhook.ValidateImagePullJob)
	hooks.Handle(webhook.ImageListPullJobMutatePath, webhook.MutateImageListPullJob)
	hooks.Handle(webhook.ImageListPullJobValidatePath, webhook.ValidateImageListPullJob)
	hooks.Handle(webhook.PodMutatePath, webhook.PodReadinessGate(o.KruisePodReadinessGate))
	hooks.Handle(webhook.CloneSetValidatePath, webhook.NewCloneSetAdmission(livePods).Validate)
	hooks.Handle(webhook.BroadcastJobValidatePath, webhook.ValidateBroadcastJob)
	hooks.Handle(webhook.DaemonSetValidatePath, webhook.ValidateDaemonSet)
	stsAdmission := &webhook.StatefulSetAdmission{
		ResizeClaims: features.Enabled(o.Features, features.StatefulSetAutoResizePVCGate),
		Classes:      webhook.ClientStorageClasses{Client: client},
	}
	hooks.Handle(webhook.StatefulSetValidatePath, stsAdmission.Validate)
	hooks.Handle(webhook.AdvancedCronJobValidatePath, webhook.ValidateAdvancedCronJob)
	// The pod webhook reads PersistentPodStates from the informer, warm on
	// every replica.
	ppsLister := ppsInformer.Lister()
	ppsAdmission := webhook.NewPersistentPodStateAdmission(webhook.PersistentPodStateListerFunc(
		func(namespace string) ([]*v1alpha1.PersistentPodState, error) {
			return ppsLister.PersistentPodStates(namespace).List(labels.Everything())
		})).WithCustomWorkloads(podStates.WhiteList)
	hooks.Handle(webhook.PersistentPodStatePodMutatePath, ppsAdmission.MutatePod)
	hooks.Handle(webhook.PersistentPodStateValidatePath, ppsAdmission.Validate)
	// The PodUnavailableBudget pod webhook reads budgets, pods and
	// namespaces from the informers (every replica serves it) and writes a
	// budget's status only to record a disruption it allows.
	podLister, nsLister := kubeInformers.Core().V1().Pods().Lister(), kubeInformers.Core().V1().Namespaces().Lister()
	pubAdmission := webhook.NewPodUnavailableBudgetAdmission(budgets,
		webhook.PodGetterFunc(func(ns, name string) (*corev1.Pod, error) { return podLister.Pods(ns).Get(name) }), shoal, reg).
		WithNamespaces(func(name string) bool {
			ns, err := nsLister.Get(name)
			return err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
		})
	hooks.Handle(webhook.PodUnavailableBudgetPodPath, pubAdmission.ValidatePod)
	hooks.Handle(webhook.PodUnavailableBudgetValidatePath, pubAdmission.Validate)
	// WorkloadSpread: the pod webhook picks each new pod's subset (its
	// status write is the serialization point) and records deletions.
	wsAdmission := webhook.NewWorkloadSpreadAdmission(spreads,
		webhook.PodGetterFunc(func(ns, name string) (*corev1.Pod, error) { return podLister.Pods(ns).Get(name) }), shoal).
		WithCustomWorkloads(func() []spread.CustomWorkload {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			cm, err := client.CoreV1().ConfigMaps(o.Namespace).Get(ctx, wellknown.ConfigMapKruiseConfiguration, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			wl, err := spread.ParseWhiteList(cm.Data[wellknown.ConfigWorkloadSpreadWatchCustomWorkloadWhiteList])
			if err != nil {
				log.Error(err, "Read the WorkloadSpread custom workload white list")
				return nil
			}
			return wl
		})
	hooks.Handle(webhook.WorkloadSpreadPodPath, wsAdmission.Pod)
	hooks.Handle(webhook.WorkloadSpreadValidatePath, wsAdmission.Validate)
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	protection := webhook.NewDeletionProtection(webhook.ClusterDependents{
		Pods: kubeInformers.Core().V1().Pods().Lister(), Claims: kubeInformers.Core().V1().PersistentVolumeClaims().Lister(), Metadata: meta,
	}, reg)
	hooks.Handle(webhook.DeletionProtectionPath, protection.Validate)
	// SidecarSet injection reads SidecarSets, namespaces and revisions from
	// the informers, warm on every replica.
	scsLister := shoalInformers.Apps().V1beta1().SidecarSets().Lister()
	// A pod may come a moment after its namespace, before the informer
	// shows the namespace: read it live then.
	namespaceOf := func(name string) (*corev1.Namespace, error) {
		ns, err := nsLister.Get(name)
		if !apierrors.IsNotFound(err) {
			return ns, err
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	}
	injector := webhook.NewSidecarSetInjector(func() ([]*v1beta1.SidecarSet, error) { return scsLister.List(labels.Everything()) },
		namespaceOf, sidecarSets)
	hooks.Handle(webhook.SidecarSetInjectPath, injector.Mutate)
	hooks.Handle(webhook.SidecarSetMutatePath, webhook.DefaultSidecarSet)
	scsAdmission := webhook.NewSidecarSetAdmission(func() ([]*v1beta1.SidecarSet, error) { return scsLister.List(labels.Everything()) }).
		WithNamespaces(namespaceOf).
		WithPatchPodMetadataAllowed(patchPodMetadataRules(ctx, client, o.Namespace)).
		WithPatchPodMetadataDefaultsAllowed(features.Enabled(o.Features, features.SidecarSetPatchPodMetadataDefaultsAllowed))
	hooks.Handle(webhook.SidecarSetValidatePath, scsAdmission.Validate)
	hooks.Handle(webhook.PodProbeMarkerValidatePath, webhook.ValidatePodProbeMarker)
	ppmLister := shoalInformers.Apps().V1alpha1().PodProbeMarkers().Lister()
	ppmInjector := webhook.NewPodProbeMarkerInjector(func(namespace string) ([]*v1alpha1.PodProbeMarker, error) {
		return ppmLister.PodProbeMarkers(namespace).List(labels.Everything())
	})
	if features.Enabled(o.Features, features.EnablePodProbeMarkerOnServerless) {
		hooks.Handle(webhook.PodProbeMarkerPodMutatePath, ppmInjector.Mutate)
	} else {
		hooks.Handle(webhook.PodProbeMarkerPodMutatePath, webhook.AllowAll)
	}
	hooks.Handle(webhook.LaunchPriorityPath, webhook.LaunchPriority)
	hooks.HandleConversion(webhook.ConvertPath, conversion.Convert)

	var informersSynced atomic.Bool
	ready := func() error {
		switch {
		case !informersSynced.Load():
			return errors.New("informers not synced")
		case !certManager.Ready():
			return errors.New("no serving certificate yet")
		case !hooks.Serving():
			return errors.New("webhook server not listening")
		}
		return nil
	}

	g, ctx := errgroup.WithContext(ctx)
	mux := httpserve.Mux(reg, ready)
	if o.Profiling {
		httpserve.Profiling(mux)
	}
	// Per-node detail of ImagePullJobs, for kubectl through the
	// apiserver's service proxy (port "http" of the shoal-coordinator
	// Service, which reaches the leader only).
	mux.Handle(pullview.NodesPathPrefix, pulls.NodesHandler())
	// Per-pod probe states of PodProbeMarkers, the same way.
	mux.Handle(probeview.PodsPathPrefix, probeMarkers.PodsHandler())
	g.Go(func() error { return httpserve.ListenAndServe(ctx, o.MetricsAddr, mux) })
	g.Go(func() error { return certManager.Run(ctx) })
	g.Go(func() error { return writer.Run(ctx) })
	g.Go(func() error { return crrs.Run(ctx) })
	g.Go(func() error { return readiness.Run(ctx) })
	g.Go(func() error { return sets.Run(ctx) })
	g.Go(func() error { return bcj.Run(ctx) })
	g.Go(func() error { return cronJobs.Run(ctx) })
	g.Go(func() error { return distributions.Run(ctx) })
	g.Go(func() error { return podStates.Run(ctx) })
	g.Go(func() error { return budgets.Run(ctx) })
	g.Go(func() error { return daemons.Run(ctx) })
	g.Go(func() error { return united.Run(ctx) })
	g.Go(func() error { return launches.Run(ctx) })
	g.Go(func() error { return sidecarSets.Run(ctx) })
	g.Go(func() error { return terminator.Run(ctx) })
	g.Go(func() error { return probeMarkers.Run(ctx) })
	g.Go(func() error { return spreads.Run(ctx) })
	g.Go(func() error { return statefulSets.Run(ctx) })
	g.Go(func() error { return pulls.Run(ctx) })
	g.Go(func() error { return lists.Run(ctx) })
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("start recording events: %w", err)
	}
	kubeInformers.Start(ctx.Done())
	copyInformers.Start(ctx.Done())
	configInformers.Start(ctx.Done())
	shoalInformers.Start(ctx.Done())
	if nsInformers != nil {
		nsInformers.Start(ctx.Done())
	}
	g.Go(func() error {
		if err := certManager.WaitReady(ctx); err != nil {
			return nil
		}
		return hooks.Run(ctx, o.WebhookAddr)
	})
	g.Go(func() error {
		if err := certManager.WaitReady(ctx); err != nil {
			return nil
		}
		lis, err := net.Listen("tcp", o.GRPCAddr)
		if err != nil {
			return fmt.Errorf("listen for agents on %s: %w", o.GRPCAddr, err)
		}
		creds := credentials.NewTLS(&tls.Config{GetCertificate: serving.GetCertificate, MinVersion: tls.VersionTLS12})
		return server.Serve(ctx, lis, creds)
	})
	g.Go(func() error {
		// A new replica lets a warm standby take over first: it waits until
		// it is warm itself and then, when another replica is Ready (a warm
		// standby, campaigning already), two retry periods more, which the
		// standby uses to take a released lease. With no other replica
		// Ready (the coordinator comes back from zero) it campaigns at once.
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return nil
		}
		informersSynced.Store(true)
		log.Info("Informers synced")
		if certManager.WaitReady(ctx) != nil {
			return nil
		}
		if otherReplicaReady(ctx, client, o) {
			grace := time.NewTimer(2 * o.RetryPeriod)
			select {
			case <-ctx.Done():
				grace.Stop()
				return nil
			case <-grace.C:
			}
		}
		return lead(ctx, client, o, func(ctx context.Context) {
			leading.Store(true)
			log.Info("Leading")
			if err := certManager.Sync(ctx); err != nil {
				log.Error(err, "Sync CA as the new leader")
			}
			// Agents reach this replica once its pod has the leader label,
			// and an agent drops whatever its first WorkSync leaves out.
			// A replica that comes up with no other running has its
			// controllers still placing the node work of the objects just
			// listed: let them finish first.
			if err := syncloop.WaitIdle(ctx, 20*time.Millisecond, placeTimeout, func() bool {
				return crrs.Idle() && pulls.Idle() && terminator.Idle() && probeMarkers.Idle()
			}); err != nil {
				log.Error(err, "Node work not all placed; accepting agents anyway")
			}
			labelLeader(ctx, client, o, true)
			crrs.Resync()
			readiness.Resync()
			sets.Resync()
			bcj.Resync()
			cronJobs.Resync()
			distributions.Resync()
			podStates.Resync()
			budgets.Resync()
			daemons.Resync()
			united.Resync()
			launches.Resync()
			sidecarSets.Resync()
			terminator.Resync()
			probeMarkers.Resync()
			spreads.Resync()
			statefulSets.Resync()
			pulls.Resync()
			lists.Resync()
		}, func() {
			// Step down without restarting: informers and the work store
			// stay warm, agents go to whoever leads now, and this replica
			// campaigns again as a standby.
			leading.Store(false)
			server.Disconnect(dispatch.ErrNotLeader)
			log.Info("Lost the leader lease; standing by")
			labelLeader(ctx, client, o, false)
		})
	})
	return g.Wait()
}

// kruiseInformers starts an informer for every Shoal kind, so a new leader
// has the whole picture at once.
func kruiseInformers(f shoalinformers.SharedInformerFactory) []cache.SharedIndexInformer {
	a, b, p := f.Apps().V1alpha1(), f.Apps().V1beta1(), f.Policy().V1alpha1()
	// Each kind at its storage version (docs/dev/api-versions.md): reading
	// another would send every object through the conversion webhook.
	return []cache.SharedIndexInformer{
		b.CloneSets().Informer(), b.DaemonSets().Informer(), b.SidecarSets().Informer(),
		a.ContainerRecreateRequests().Informer(), a.ImagePullJobs().Informer(), a.ImageListPullJobs().Informer(),
		a.PodProbeMarkers().Informer(), a.WorkloadSpreads().Informer(), a.ResourceDistributions().Informer(),
		a.PersistentPodStates().Informer(), b.AdvancedCronJobs().Informer(), a.UnitedDeployments().Informer(),
		b.BroadcastJobs().Informer(), b.StatefulSets().Informer(), p.PodUnavailableBudgets().Informer(),
	}
}

// lead campaigns for the Lease until ctx ends: started runs when this
// replica leads (its ctx ends with the leadership), stepDown after it lost
// the lease, and then it campaigns again.
func lead(ctx context.Context, client kubernetes.Interface, o Options, started func(context.Context), stepDown func()) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName, Namespace: o.Namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.PodName},
	}
	for ctx.Err() == nil {
		var led atomic.Bool // OnStartedLeading runs in its own goroutine
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   o.LeaseDuration,
			RenewDeadline:   o.RenewDeadline,
			RetryPeriod:     o.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { led.Store(true); started(ctx) },
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					klog.FromContext(ctx).Info("Leader", "identity", id)
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when ctx ends or the lease is lost
		if led.Load() && ctx.Err() == nil {
			stepDown()
		}
	}
	return nil
}

// labelLeader sets or removes the leader label on this replica's pod,
// retrying until it sticks or ctx ends: agents reach the leader only
// through it.
func labelLeader(ctx context.Context, client kubernetes.Interface, o Options, leader bool) {
	backoff := 200 * time.Millisecond
	for {
		err := setLeaderLabel(ctx, client, o.Namespace, o.PodName, leader)
		if err == nil || ctx.Err() != nil {
			return
		}
		klog.FromContext(ctx).Error(err, "Set the leader label; retrying", "leader", leader, "in", backoff)
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// setLeaderLabel adds or removes the leader label on the coordinator's pod.
func setLeaderLabel(ctx context.Context, client kubernetes.Interface, ns, pod string, leader bool) error {
	if pod == "" {
		return nil // running outside a pod (development)
	}
	value := "null"
	if leader {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, LeaderLabel, value)
	_, err := client.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set %s=%v on pod %s/%s: %w", LeaderLabel, leader, ns, pod, err)
	}
	return nil
}

func restConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config (in-cluster, or --kubeconfig): %w", err)
	}
	cfg.QPS, cfg.Burst = cmp.Or(qps, 50), cmp.Or(burst, 100)
	cfg.UserAgent = "shoal-coordinator"
	return cfg, nil
}

// nodeGetter reads nodes from the informer for the webhooks.
type nodeGetter struct{ lister corelisters.NodeLister }

// Node implements webhook.NodeGetter.
func (g nodeGetter) Node(name string) (*corev1.Node, error) { return g.lister.Get(name) }

// patchPodMetadataRules reads OpenKruise's patchPodMetadata allow-list
// from the kruise-configuration ConfigMap in the coordinator's namespace,
// live at each SidecarSet admission (they are rare): a missing ConfigMap
// or key is no rules.
func patchPodMetadataRules(ctx context.Context, client kubernetes.Interface, namespace string) func() ([]webhook.SidecarSetPatchPodMetadataRule, error) {
	return func() ([]webhook.SidecarSetPatchPodMetadataRule, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, wellknown.ConfigMapKruiseConfiguration, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, wellknown.ConfigMapKruiseConfiguration, err)
		}
		raw := cm.Data[wellknown.ConfigSidecarSetPatchPodMetadataWhiteList]
		if raw == "" {
			return nil, nil
		}
		var list struct {
			Rules []webhook.SidecarSetPatchPodMetadataRule `json:"rules"`
		}
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", namespace, wellknown.ConfigMapKruiseConfiguration,
				wellknown.ConfigSidecarSetPatchPodMetadataWhiteList, err)
		}
		return list.Rules, nil
	}
}

// customWorkloadReader reads the target of a WorkloadSpread whose kind the
// custom workload white list of the kruise-configuration ConfigMap names
// (read at each call: WorkloadSpreads of custom kinds are rare): the
// object, through the dynamic client, and the list's replicasPath.
func customWorkloadReader(client kubernetes.Interface, dyn dynamic.Interface, namespace string, mapper meta.ResettableRESTMapper) func(ctx context.Context, ws *v1alpha1.WorkloadSpread) (map[string]any, string, bool, error) {
	return func(ctx context.Context, ws *v1alpha1.WorkloadSpread) (map[string]any, string, bool, error) {
		ref := ws.Spec.TargetReference
		if ref == nil {
			return nil, "", false, nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, "", false, nil
		}
		cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, wellknown.ConfigMapKruiseConfiguration, metav1.GetOptions{})
		if err != nil {
			return nil, "", false, nil
		}
		list, err := spread.ParseWhiteList(cm.Data[wellknown.ConfigWorkloadSpreadWatchCustomWorkloadWhiteList])
		if err != nil {
			return nil, "", false, fmt.Errorf("the custom workload white list: %w", err)
		}
		i := slices.IndexFunc(list, func(w spread.CustomWorkload) bool { return w.Group == gv.Group && w.Kind == ref.Kind })
		if i < 0 {
			return nil, "", false, nil
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
		mapping, err := mapper.RESTMapping(gk, gv.Version)
		if meta.IsNoMatchError(err) {
			mapper.Reset()
			mapping, err = mapper.RESTMapping(gk, gv.Version)
		}
		if err != nil {
			return nil, "", false, fmt.Errorf("find the resource of %s: %w", gk, err)
		}
		obj, err := dyn.Resource(mapping.Resource).Namespace(ws.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", false, fmt.Errorf("get %s %s/%s: %w", gk, ws.Namespace, ref.Name, err)
		}
		return obj.Object, list[i].ReplicasPath, true, nil
	}
}

// otherReplicaReady reports whether another coordinator pod than this one
// is Ready: a warm standby. When it cannot tell, it says yes (the new
// replica then waits as if there were one).
func otherReplicaReady(ctx context.Context, client kubernetes.Interface, o Options) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pods, err := client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=shoal-coordinator"})
	if err != nil {
		return true
	}
	for _, p := range pods.Items {
		if p.Name == o.PodName || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}
