package kube

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// API is the part of the Kubernetes API that kube mode calls. Its method
// sets are those of client-go's typed clients, so a clientset (the fake
// one in tests) serves as one through a thin adapter. hutch does not
// link the generated clientset itself: its scheme package registers every
// API group of Kubernetes at package init, 12 ms and 0.7 MB of
// allocations in every hutch process (each CLI call included), though
// only kube: uses any of it, and only pods, secrets, namespaces and
// network policies.
type API interface {
	Pods(namespace string) PodAPI
	Secrets(namespace string) SecretAPI
	NetworkPolicies(namespace string) NetworkPolicyAPI
	Namespaces() NamespaceAPI
	// CoreREST is the core/v1 REST client: exec streams and /version.
	CoreREST() rest.Interface
}

// PodAPI is what kube mode does with pods.
type PodAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Update(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error)
	UpdateResize(ctx context.Context, name string, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// SecretAPI is what kube mode does with secrets (the vault's files).
type SecretAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NetworkPolicyAPI makes the namespace's isolation policies.
type NetworkPolicyAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*networkingv1.NetworkPolicy, error)
	Create(ctx context.Context, np *networkingv1.NetworkPolicy, opts metav1.CreateOptions) (*networkingv1.NetworkPolicy, error)
}

// NamespaceAPI checks that hutch's namespace exists.
type NamespaceAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error)
}

// codecs is the scheme of the types kube mode sends and reads, made on
// first use rather than at package init, for the reason API gives.
var codecs = sync.OnceValue(func() apiCodecs {
	s := runtime.NewScheme()
	// The options types (GetOptions, ListOptions, ...) as query
	// parameters, as client-go's own scheme registers them.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(s); err != nil {
		panic(err) // a programming error: the registrations are static
	}
	if err := networkingv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return apiCodecs{factory: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}
})

type apiCodecs struct {
	factory serializer.CodecFactory
	params  runtime.ParameterCodec
}

// restAPI is API over REST clients of the API server, one per group
// version, sharing one HTTP client (its connections and rate limiter).
type restAPI struct {
	core, networking rest.Interface
}

// newAPI makes the REST clients for cfg.
func newAPI(cfg *rest.Config) (API, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	client := func(apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath, c.GroupVersion = apiPath, &gv
		c.NegotiatedSerializer = codecs().factory.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(c, hc)
	}
	core, err := client("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	networking, err := client("/apis", networkingv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return restAPI{core: core, networking: networking}, nil
}

func (a restAPI) Pods(ns string) PodAPI {
	return podREST{kind[*corev1.Pod, *corev1.PodList]{a.core, ns, "pods", newObj[corev1.Pod], newObj[corev1.PodList]}}
}

func (a restAPI) Secrets(ns string) SecretAPI {
	return kind[*corev1.Secret, *corev1.SecretList]{a.core, ns, "secrets", newObj[corev1.Secret], newObj[corev1.SecretList]}
}

func (a restAPI) NetworkPolicies(ns string) NetworkPolicyAPI {
	return kind[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]{a.networking, ns, "networkpolicies", newObj[networkingv1.NetworkPolicy], newObj[networkingv1.NetworkPolicyList]}
}

func (a restAPI) Namespaces() NamespaceAPI {
	return kind[*corev1.Namespace, *corev1.NamespaceList]{a.core, "", "namespaces", newObj[corev1.Namespace], newObj[corev1.NamespaceList]}
}

func (a restAPI) CoreREST() rest.Interface { return a.core }

func newObj[T any]() *T { return new(T) }

// object is a Kubernetes object: runtime.Object with metadata.
type object interface {
	runtime.Object
	GetName() string
}

// kind is one kind of object in one namespace ("" for cluster-scoped
// kinds), its requests made as client-go's generated clients make them.
type kind[T object, L runtime.Object] struct {
	client    rest.Interface
	namespace string
	name      string // the resource's plural, as in the URL
	newItem   func() T
	newList   func() L
}

func (r kind[T, L]) request(req *rest.Request) *rest.Request {
	return req.NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name)
}

func (r kind[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newItem()
	err := r.request(r.client.Get()).Name(name).VersionedParams(&opts, codecs().params).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.request(r.client.Get()).VersionedParams(&opts, codecs().params).Timeout(timeoutOf(opts)).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request(r.client.Get()).VersionedParams(&opts, codecs().params).Timeout(timeoutOf(opts)).Watch(ctx)
}

func (r kind[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newItem()
	err := r.request(r.client.Post()).VersionedParams(&opts, codecs().params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newItem()
	err := r.request(r.client.Put()).Name(obj.GetName()).VersionedParams(&opts, codecs().params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newItem()
	err := r.request(r.client.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, codecs().params).Body(data).Do(ctx).Into(out)
	return out, err
}

func (r kind[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.request(r.client.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

// podREST adds the pods' resize subresource.
type podREST struct {
	kind[*corev1.Pod, *corev1.PodList]
}

func (p podREST) UpdateResize(ctx context.Context, name string, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	out := new(corev1.Pod)
	err := p.request(p.client.Put()).Name(name).SubResource("resize").VersionedParams(&opts, codecs().params).Body(pod).Do(ctx).Into(out)
	return out, err
}

// timeoutOf is a list's or watch's own timeout, as the server is told.
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
