package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	client "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Why a check of the Kubernetes API failed (the reason label of
// kvwatch_discovery_kubernetes_api_failures_total).
const (
	APIUnreachable  = "unreachable"  // no connection, or no answer in time
	APIUnauthorized = "unauthorized" // 401: the token or certificate is refused
	APIForbidden    = "forbidden"    // 403: RBAC does not let kvwatch list what the role watches
	APIOther        = "other"        // any other error (TLS, 5xx)
)

var apiReasons = []string{APIUnreachable, APIUnauthorized, APIForbidden, APIOther}

// kubeCheck asks the API server of one kubernetes_sd_configs entry what
// its discoverer needs: that it answers, accepts kvwatch's credentials and
// lets it list every resource the role watches in every namespace; and,
// for role pod, which matching pods have no IP yet (Prometheus makes no
// target of them, and says nothing).
type kubeCheck struct {
	set        string
	host       string
	role       kubernetes.Role
	client     client.Interface
	namespaces []string // "" is every namespace
	lists      []listing
	// podLabels and podFields select the pods of role pod (the entry's
	// pod selector).
	podLabels, podFields string
}

// listing is one resource a role's discoverer lists.
type listing struct {
	resource   string
	namespaced bool
	// list lists at most one object with the entry's selector for this
	// resource, returning how many came back.
	list func(ctx context.Context, ns string) (int, error)
}

// checkTimeout bounds one request of a check.
const checkTimeout = 10 * time.Second

// noIPLimit bounds the pods without an IP a check lists.
const noIPLimit = 100

// newKubeCheck builds the check of entry set, with the client its
// discoverer uses: kubeconfig_file, else api_server with the entry's HTTP
// client keys, else the pod's service account (in-cluster), as Prometheus
// decides.
func newKubeCheck(set string, c *kubernetes.SDConfig) (*kubeCheck, error) {
	var rc *rest.Config
	var err error
	switch {
	case c.KubeConfig != "":
		if rc, err = clientcmd.BuildConfigFromFlags("", c.KubeConfig); err != nil {
			return nil, fmt.Errorf("%s: kubeconfig_file %s: %w", set, c.KubeConfig, err)
		}
	case c.APIServer.URL == nil:
		if rc, err = rest.InClusterConfig(); err != nil {
			if errors.Is(err, rest.ErrNotInCluster) {
				return nil, fmt.Errorf("%s: no kubeconfig_file or api_server, and kvwatch is not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset), so it has no service account to discover with; set kubeconfig_file", set)
			}
			return nil, fmt.Errorf("%s: the pod's service account: %w", set, err)
		}
	default:
		rt, err := promcfg.NewRoundTripperFromConfig(c.HTTPClientConfig, "kubernetes_sd")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", set, err)
		}
		rc = &rest.Config{Host: c.APIServer.String(), Transport: rt}
	}
	rc.Timeout = checkTimeout
	cl, err := client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", set, err)
	}
	k := &kubeCheck{set: set, host: rc.Host, role: c.Role, client: cl, namespaces: c.NamespaceDiscovery.Names}
	if c.NamespaceDiscovery.IncludeOwnNamespace {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s: namespaces.own_namespace: cannot read the pod's namespace: %v", set, err)
		}
		k.namespaces = append(slices.Clone(k.namespaces), string(b))
	}
	if len(k.namespaces) == 0 {
		k.namespaces = []string{metav1.NamespaceAll}
	}
	sel := map[kubernetes.Role]kubernetes.SelectorConfig{}
	for _, s := range c.Selectors {
		sel[s.Role] = s
	}
	k.podLabels, k.podFields = sel[kubernetes.RolePod].Label, sel[kubernetes.RolePod].Field
	opts := func(r kubernetes.Role) metav1.ListOptions {
		return metav1.ListOptions{Limit: 1, LabelSelector: sel[r].Label, FieldSelector: sel[r].Field}
	}
	pods := listing{"pods", true, func(ctx context.Context, ns string) (int, error) {
		l, err := cl.CoreV1().Pods(ns).List(ctx, opts(kubernetes.RolePod))
		return count(l, err)
	}}
	services := listing{"services", true, func(ctx context.Context, ns string) (int, error) {
		l, err := cl.CoreV1().Services(ns).List(ctx, opts(kubernetes.RoleService))
		return count(l, err)
	}}
	switch c.Role {
	case kubernetes.RolePod:
		k.lists = []listing{pods}
	case kubernetes.RoleService:
		k.lists = []listing{services}
	case kubernetes.RoleEndpoint:
		k.lists = []listing{{"endpoints", true, func(ctx context.Context, ns string) (int, error) {
			l, err := cl.CoreV1().Endpoints(ns).List(ctx, opts(kubernetes.RoleEndpoint))
			return count(l, err)
		}}, services, pods}
	case kubernetes.RoleEndpointSlice:
		k.lists = []listing{{"endpointslices.discovery.k8s.io", true, func(ctx context.Context, ns string) (int, error) {
			l, err := cl.DiscoveryV1().EndpointSlices(ns).List(ctx, opts(kubernetes.RoleEndpointSlice))
			return count(l, err)
		}}, services, pods}
	}
	if c.AttachMetadata.Node {
		k.lists = append(k.lists, listing{"nodes", false, func(ctx context.Context, _ string) (int, error) {
			l, err := cl.CoreV1().Nodes().List(ctx, opts(kubernetes.RoleNode))
			return count(l, err)
		}})
	}
	if c.AttachMetadata.Namespace {
		k.lists = append(k.lists, listing{"namespaces", false, func(ctx context.Context, _ string) (int, error) {
			l, err := cl.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
			return count(l, err)
		}})
	}
	return k, nil
}

// count is how many items a list returned.
func count(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}

// kubeResult is what one check found.
type kubeResult struct {
	// err is the first failure; reason says why (APIUnreachable...).
	err    error
	reason string
	// empty: the role's resource has no object the entry selects (its
	// discoverer, synced, has nothing to send).
	empty bool
	// noIP are pods of role pod without an IP yet (namespace/name), at
	// most noIPLimit; noIPMore says there are more.
	noIP     []string
	noIPMore bool
}

// check asks the API server once.
func (k *kubeCheck) check(ctx context.Context) kubeResult {
	total := 0
	for i, l := range k.lists {
		nss := k.namespaces
		if !l.namespaced {
			nss = []string{metav1.NamespaceAll}
		}
		for _, ns := range nss {
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			n, err := l.list(cctx, ns)
			cancel()
			if err != nil {
				return kubeResult{err: k.explain(l.resource, ns, err), reason: apiReason(err)}
			}
			if i == 0 {
				total += n
			}
		}
	}
	r := kubeResult{empty: total == 0}
	if k.role == kubernetes.RolePod {
		r.noIP, r.noIPMore, r.err = k.podsWithoutIP(ctx)
		if r.err != nil {
			r.reason = apiReason(r.err)
			r.err = k.explain("pods", "", r.err)
		}
	}
	return r
}

// podsWithoutIP lists the pods the entry selects that have no IP yet.
func (k *kubeCheck) podsWithoutIP(ctx context.Context) ([]string, bool, error) {
	fs := fields.OneTermEqualSelector("status.podIP", "").String()
	if k.podFields != "" {
		fs += "," + k.podFields
	}
	var out []string
	more := false
	for _, ns := range k.namespaces {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		l, err := k.client.CoreV1().Pods(ns).List(cctx, metav1.ListOptions{LabelSelector: k.podLabels, FieldSelector: fs, Limit: noIPLimit})
		cancel()
		if err != nil {
			return nil, false, err
		}
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		more = more || l.Continue != ""
	}
	slices.Sort(out)
	if len(out) > noIPLimit {
		out, more = out[:noIPLimit], true
	}
	return out, more, nil
}

// explain says what a failed list means and how to fix it.
func (k *kubeCheck) explain(resource, ns string, err error) error {
	where := "in namespace " + ns
	if ns == "" {
		where = "in every namespace"
	}
	switch apiReason(err) {
	case APIUnreachable:
		return fmt.Errorf("cannot reach the Kubernetes API at %s: %w; the entry's targets stay as they were until it answers, the other targets are not affected", k.host, err)
	case APIUnauthorized:
		return fmt.Errorf("the Kubernetes API at %s refuses kvwatch's credentials: %w; renew the token of kubeconfig_file or of the pod's service account", k.host, err)
	case APIForbidden:
		return fmt.Errorf("kvwatch may not list %s %s: %w; grant get, list and watch on %s to kvwatch's user or service account (a ClusterRole and ClusterRoleBinding, or a Role and RoleBinding per namespace: docs/kubernetes.md#discovery)", resource, where, err, resource)
	}
	return fmt.Errorf("listing %s %s at %s: %w", resource, where, k.host, err)
}

// apiReason says why a request to the API server failed, by the error's
// type.
func apiReason(err error) string {
	var ne net.Error
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case apierrors.IsForbidden(err):
		return APIForbidden
	case apierrors.IsUnauthorized(err):
		return APIUnauthorized
	case errors.As(err, &ve), errors.As(err, &ua), errors.As(err, &he):
		return APIOther // reached, but its certificate is not trusted: a url.Error, yet no network fault
	case errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		return APIUnreachable
	}
	return APIOther
}
