package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
)

func init() { addCommand(newStatusCmd) }

// coordinatorSelector selects the chart's coordinator Services and pods.
const coordinatorSelector = "app.kubernetes.io/name=joiner,app.kubernetes.io/component=coordinator"

// statusAccountSuffix: the chart names the status ServiceAccount after
// the coordinator Service (and StatefulSet): <name>-status.
const statusAccountSuffix = "-status"

// statusTokenTTL is the life of the status token status requests
// (TokenRequest's shortest).
const statusTokenTTL = 10 * time.Minute

// statusFlags are the flags of `joiner status`.
type statusFlags struct {
	addr, tlsDir string
	service, pod string
	statusSA     string
	scheme       string
	all          bool
	timeout      time.Duration
	output       *outputFlag
	kube         *kubeFlags
}

// newStatusCmd asks one coordinator replica for its view (GET /v1/status)
// and prints raft peers with the leader marked, then launch intents and
// instances. A follower answers from its own FSM, which may lag the leader.
func newStatusCmd(*globals) *cobra.Command {
	f := &statusFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show raft peers, leader, launch intents and instances of a coordinator",
		Long: `status asks one coordinator replica for its view: raft peers and leader, launch intents,
instances and their hourly cost, pending terminations and interruptions. A follower answers
from its own state, which may lag the leader's.

By default it goes through the Kubernetes API server's service proxy, as kubectl would (no
port-forward):
  GET /api/v1/namespaces/NS/services/https:SERVICE:http/proxy/v1/status
NS is -n, else the kubeconfig context's namespace (the one Joiner is installed in, e.g. joiner);
SERVICE is --service, else the Service in NS labelled
` + coordinatorSelector + ` that is not headless;
--pod asks one replica through the pods proxy instead.

The kubeconfig's credentials go to the API server only, never to the coordinator: status
requests a token for the status ServiceAccount (--status-service-account, default
SERVICE-status, which the chart creates) with the TokenRequest API, audience ` + api.StatusTokenAudience + `,
valid 10 minutes, and sends only that token, in ` + api.ProxiedAuthorizationHeader + ` (the API server
consumes Authorization). The coordinator accepts no other token (TokenReview for that audience
and that ServiceAccount). In NS this needs create on serviceaccounts/token for that
ServiceAccount, get and list on services, and get on services/proxy (pods/proxy with --pod):
the chart's status-reader Role grants all but pods/proxy to the subjects in its
statusReaders value. With --as, the token is requested as the impersonated user.

With --addr it dials one coordinator directly, presenting the client certificate the
coordinator keeps in --tls-dir (run it in a coordinator pod).`,
		Example: `  # the coordinators in the namespace Joiner is installed in
  joiner status -n joiner
  joiner status --context prod -n joiner --all -o wide
  # one replica, as JSON
  joiner status -n joiner --pod joiner-coordinator-1 -o json
  # inside a coordinator pod, without the API server
  joiner status --addr https://joiner-coordinator-0.joiner-coordinator-peers.joiner.svc:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.output.check(); err != nil {
				return fmt.Errorf("status: %w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			st, err := f.fetch(ctx, cmd)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			return printStatus(cmd.OutOrStdout(), st, f.output.value, f.all)
		},
	}
	f.kube = addKubeFlags(cmd, "")
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "", "coordinator HTTP API base URL (any replica), dialled directly with the client certificate in --tls-dir; empty: through the API server")
	fl.StringVar(&f.tlsDir, "tls-dir", "/var/lib/joiner/tls", "with --addr: directory with tls.crt, tls.key and ca.crt, the client certificate the coordinator keeps there for tools run in its pod (https only)")
	fl.StringVar(&f.service, "service", "", "coordinator Service to proxy to (empty: the one in the namespace labelled "+coordinatorSelector+" that is not headless)")
	fl.StringVar(&f.pod, "pod", "", "ask this coordinator pod through the API server's pods proxy instead of the Service")
	fl.StringVar(&f.statusSA, "status-service-account", "", "ServiceAccount (in the namespace) whose token, requested for audience "+api.StatusTokenAudience+", is the only credential sent to the coordinator (empty: the coordinator Service's or StatefulSet's name + "+statusAccountSuffix+", as the chart names it)")
	fl.StringVar(&f.scheme, "scheme", "https", "scheme of the coordinators' HTTP API behind the proxy: https, or http for coordinators run with --insecure-dev")
	f.output = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML, outName)
	fl.BoolVar(&f.all, "all", false, "also list cancelled intents and terminated or lost instances")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up on the coordinator after this long")
	_ = cmd.RegisterFlagCompletionFunc("scheme", cobra.FixedCompletions([]string{"https", "http"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("tls-dir", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	_ = cmd.RegisterFlagCompletionFunc("service", f.completeObjects(func(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Services(ns).List(ctx, o)
	}))
	_ = cmd.RegisterFlagCompletionFunc("pod", f.completeObjects(func(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Pods(ns).List(ctx, o)
	}))
	return cmd
}

// fetch reads the status directly (--addr) or through the API server.
func (f *statusFlags) fetch(ctx context.Context, cmd *cobra.Command) (api.Status, error) {
	if f.addr != "" {
		for _, name := range []string{"service", "pod"} {
			if cmd.Flags().Changed(name) {
				return api.Status{}, fmt.Errorf("--addr and --%s: give one (--addr dials the coordinator directly)", name)
			}
		}
		client, err := statusClient(f.addr, f.tlsDir)
		if err != nil {
			return api.Status{}, err
		}
		return api.FetchStatus(ctx, client, f.addr)
	}
	if f.service != "" && f.pod != "" {
		return api.Status{}, errors.New("--service and --pod: give one")
	}
	if f.scheme != "https" && f.scheme != "http" {
		return api.Status{}, fmt.Errorf("--scheme %q: want https or http", f.scheme)
	}
	rc, err := f.kube.restConfig()
	if err != nil {
		return api.Status{}, fmt.Errorf("%w (or dial a coordinator with --addr)", err)
	}
	ns := f.kube.namespaceGiven()
	if ns == "" {
		return api.Status{}, errors.New("no namespace: give the one Joiner is installed in with -n (e.g. -n joiner), or set it in the kubeconfig context")
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return api.Status{}, fmt.Errorf("kubernetes client: %w", err)
	}
	var target proxyTarget
	if f.pod != "" {
		target, err = podProxyTarget(ctx, cs, ns, f.pod, f.scheme)
	} else {
		target, err = serviceProxyTarget(ctx, cs, ns, f.service, f.scheme)
	}
	if err != nil {
		return api.Status{}, err
	}
	sa := f.statusSA
	if sa == "" {
		sa = target.statusSA
	}
	if sa == "" {
		return api.Status{}, fmt.Errorf("--pod %s/%s belongs to no StatefulSet to name the status ServiceAccount after: give --status-service-account", ns, f.pod)
	}
	token, err := requestStatusToken(ctx, cs, ns, sa)
	if err != nil {
		return api.Status{}, err
	}
	base, client, err := proxyClient(rc, token)
	if err != nil {
		return api.Status{}, err
	}
	st, err := api.FetchStatus(ctx, client, base+target.path)
	if errors.Is(err, api.ErrUnauthorized) {
		return st, fmt.Errorf("%w\n(the coordinator refused the token of ServiceAccount %s/%s: it accepts the one ServiceAccount its --status-service-account names, as the chart sets it; give that one with --status-service-account)", err, ns, sa)
	}
	return st, err
}

// requestStatusToken asks the API server (TokenRequest) for a token of
// ServiceAccount sa for audience api.StatusTokenAudience, valid
// statusTokenTTL: the one credential status sends the coordinator.
func requestStatusToken(ctx context.Context, cs kubernetes.Interface, ns, sa string) (string, error) {
	exp := int64(statusTokenTTL / time.Second)
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{api.StatusTokenAudience}, ExpirationSeconds: &exp}}
	out, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("requesting a status token for ServiceAccount %s/%s needs create on serviceaccounts/token for it (the chart's status-reader Role, bound to the subjects in its statusReaders value): %w", ns, sa, err)
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("ServiceAccount %s/%s, whose tokens read status, not found (a chart that predates it? or give --status-service-account): %w", ns, sa, err)
	case err != nil:
		return "", fmt.Errorf("requesting a status token for ServiceAccount %s/%s: %w", ns, sa, err)
	case out.Status.Token == "":
		return "", fmt.Errorf("requesting a status token for ServiceAccount %s/%s: the API server returned none", ns, sa)
	}
	return out.Status.Token, nil
}

// proxyClient is an HTTP client for the API server with the kubeconfig's
// credentials (for the API server alone) that sends the status token in
// api.ProxiedAuthorizationHeader, which the proxy passes on, and follows
// no redirect: a redirect would carry that header wherever it points.
func proxyClient(rc *rest.Config, token string) (string, *http.Client, error) {
	c := rest.CopyConfig(rc)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return statusToken{next: rt, token: token} })
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes client: %w", err)
	}
	client.CheckRedirect = refuseRedirect
	u, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return "", nil, fmt.Errorf("kubeconfig server %q: %w", c.Host, err)
	}
	return strings.TrimSuffix(u.String(), "/"), client, nil
}

// refuseRedirect is the proxy client's CheckRedirect.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("refusing the redirect to %s: the status token goes to the coordinator only", req.URL.Redacted())
}

// statusToken sets api.ProxiedAuthorizationHeader to the status token.
type statusToken struct {
	next  http.RoundTripper
	token string
}

func (s statusToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.ProxiedAuthorizationHeader, "Bearer "+s.token)
	return s.next.RoundTrip(r)
}

// proxyTarget is where status asks through the API server.
type proxyTarget struct {
	// path proxies to the coordinator's HTTP port.
	path string
	// statusSA is the status ServiceAccount the chart pairs with that
	// coordinator ("" when unknown).
	statusSA string
}

// serviceProxyTarget proxies to the coordinator Service's HTTP port:
// name, else the one non-headless Service in ns labelled as the chart's
// coordinators.
func serviceProxyTarget(ctx context.Context, cs kubernetes.Interface, ns, name, scheme string) (proxyTarget, error) {
	var svc *corev1.Service
	if name != "" {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return proxyTarget{}, fmt.Errorf("--service %s in namespace %s: %w", name, ns, err)
		}
		svc = s
	} else {
		l, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: coordinatorSelector})
		if err != nil {
			return proxyTarget{}, fmt.Errorf("finding the coordinator Service in namespace %s: %w", ns, err)
		}
		var found []string
		for i := range l.Items {
			if l.Items[i].Spec.ClusterIP != corev1.ClusterIPNone {
				svc = &l.Items[i]
				found = append(found, l.Items[i].Name)
			}
		}
		switch len(found) {
		case 0:
			return proxyTarget{}, fmt.Errorf("no coordinator Service in namespace %s (a Service labelled %s that is not headless): give the namespace Joiner is installed in with -n, or --service", ns, coordinatorSelector)
		case 1:
		default:
			return proxyTarget{}, fmt.Errorf("%d coordinator Services in namespace %s (%s): pick one with --service", len(found), ns, strings.Join(found, ", "))
		}
	}
	port, err := servicePort(svc)
	if err != nil {
		return proxyTarget{}, err
	}
	return proxyTarget{
		path:     fmt.Sprintf("/api/v1/namespaces/%s/services/%s/proxy", url.PathEscape(svc.Namespace), url.PathEscape(scheme+":"+svc.Name+":"+port)),
		statusSA: svc.Name + statusAccountSuffix,
	}, nil
}

// servicePort names the Service's HTTP port: the one named http, else its
// only port.
func servicePort(svc *corev1.Service) (string, error) {
	for _, p := range svc.Spec.Ports {
		if p.Name == "http" {
			return p.Name, nil
		}
	}
	if len(svc.Spec.Ports) == 1 {
		p := svc.Spec.Ports[0]
		if p.Name != "" {
			return p.Name, nil
		}
		return strconv.Itoa(int(p.Port)), nil
	}
	return "", fmt.Errorf("Service %s/%s: no port named http", svc.Namespace, svc.Name)
}

// podProxyTarget proxies to the pod's container port named http.
func podProxyTarget(ctx context.Context, cs kubernetes.Interface, ns, name, scheme string) (proxyTarget, error) {
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return proxyTarget{}, fmt.Errorf("--pod %s in namespace %s: %w", name, ns, err)
	}
	var ports []corev1.ContainerPort
	for _, c := range pod.Spec.Containers {
		ports = append(ports, c.Ports...)
	}
	port := 0
	for _, p := range ports {
		if p.Name == "http" {
			port = int(p.ContainerPort)
		}
	}
	if port == 0 && len(ports) == 1 {
		port = int(ports[0].ContainerPort)
	}
	if port == 0 {
		return proxyTarget{}, fmt.Errorf("--pod %s/%s: no container port named http", ns, name)
	}
	t := proxyTarget{path: fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/proxy", url.PathEscape(ns), url.PathEscape(scheme+":"+name+":"+strconv.Itoa(port)))}
	if o := metav1.GetControllerOf(pod); o != nil && o.Kind == "StatefulSet" {
		t.statusSA = o.Name + statusAccountSuffix
	}
	return t, nil
}

// completeObjects completes a flag with the names of the coordinator's
// objects (labelled coordinatorSelector) in the list (a typed List, e.g.
// *corev1.PodList) list returns from the cluster the kube flags name
// (nothing when it is not reachable).
func (f *statusFlags) completeObjects(list func(context.Context, kubernetes.Interface, string, metav1.ListOptions) (runtime.Object, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		cs, err := f.kube.clientset()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns := f.kube.namespaceGiven() // "": every namespace
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		l, err := list(ctx, cs, ns, metav1.ListOptions{LabelSelector: coordinatorSelector})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if err := meta.EachListItem(l, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				names = append(names, m.GetName())
			}
			return err
		}); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// statusClient presents the certificate in dir to an https address (the
// files the coordinator keeps for tools, see cluster.TLS.WriteFiles).
func statusClient(addr, dir string) (*http.Client, error) {
	if !strings.HasPrefix(addr, "https://") {
		return &http.Client{}, nil
	}
	t, err := cluster.LoadTLS(cluster.TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		CAFile: filepath.Join(dir, "ca.crt")})
	if err != nil {
		return nil, fmt.Errorf("--tls-dir %s: %w", dir, err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: t.HTTPClientConfig()}}, nil
}

// printStatus writes st in format.
func printStatus(w io.Writer, st api.Status, format string, all bool) error {
	switch format {
	case outJSON, outYAML:
		return printData(w, st, format)
	case outName:
		var names []string
		for _, in := range st.Intents {
			if all || in.State != "cancelled" {
				names = append(names, "launchintent/"+in.ID)
			}
		}
		for _, i := range st.Instances {
			if all || live(i) {
				names = append(names, "instance/"+i.ID)
			}
		}
		return printNames(w, names)
	}
	return renderStatus(w, st, all, format == outWide)
}

func live(i api.Instance) bool { return i.State != "terminated" && i.State != "lost" }

// renderStatus prints the tables (pure: the same status, the same text);
// wide adds columns.
func renderStatus(w io.Writer, st api.Status, all, wide bool) error {
	role := "follower: its view may lag the leader"
	if st.ServedByLeader {
		role = "leader"
	}
	fmt.Fprintf(w, "Served by %s (%s), applied index %d, last index %d, term %d\n\n",
		st.ServedBy, role, st.Raft.AppliedIndex, st.Raft.LastIndex, st.Raft.Term)
	if st.Cluster != nil {
		renderCluster(w, st.Cluster)
	}

	peers := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Peer", false), column("Address", false), column("Suffrage", false), column("Role", false)}}
	for _, p := range st.Raft.Peers {
		r := ""
		switch {
		case p.Leader:
			r = "leader *"
		case p.Voter:
			r = "follower"
		default:
			r = "non-voter"
		}
		if p.ID == st.ServedBy {
			r += " (this replica)"
		}
		peers.Rows = append(peers.Rows, row(p.ID, p.Address, p.Suffrage, r))
	}
	if err := printTable(w, peers, wide); err != nil {
		return err
	}
	if st.Raft.LeaderID == "" {
		fmt.Fprintln(w, "no leader known to this replica")
	}

	fmt.Fprintln(w)
	intents := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Intent", false), column("NodeClaim", false), column("NodePool", false), column("State", false), column("Attempt", false),
		column("Instance", false), column("Pods", false), column("Instance Types", false), column("Created", true), column("Last Error", true)}}
	for _, in := range st.Intents {
		if !all && in.State == "cancelled" {
			continue
		}
		types := strings.Join(in.InstanceTypes, ",")
		if len(in.InstanceTypes) > 3 && !wide {
			types = fmt.Sprintf("%s and %d more", strings.Join(in.InstanceTypes[:3], ","), len(in.InstanceTypes)-3)
		}
		intents.Rows = append(intents.Rows, row(in.ID, dash(in.NodeClaim), dash(in.NodePool), in.State, in.Attempt,
			dash(in.InstanceID), in.Pods, dash(types), timestamp(in.CreatedAt), dash(in.LastError)))
	}
	if err := printTable(w, intents, wide); err != nil {
		return err
	}
	if len(intents.Rows) == 0 {
		fmt.Fprintln(w, "no launch intents")
	}

	fmt.Fprintln(w)
	instances := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Instance", false), column("Type", false), column("Zone", false), column("Capacity", false), column("Price/h", false),
		column("State", false), column("Node", false), column("Intent", true), column("Launched", true)}}
	var total float64
	byType := map[string]int{}
	for _, i := range st.Instances {
		if live(i) {
			total += i.Price
			byType[i.InstanceType]++
		}
		if !all && !live(i) {
			continue
		}
		instances.Rows = append(instances.Rows, row(i.ID, i.InstanceType, i.Zone, i.CapacityType, fmt.Sprintf("%.4f", i.Price), i.State,
			dash(i.Node), dash(i.IntentID), timestamp(i.LaunchedAt)))
	}
	if err := printTable(w, instances, wide); err != nil {
		return err
	}
	if len(instances.Rows) == 0 {
		fmt.Fprintln(w, "no instances")
	}
	types := make([]string, 0, len(byType))
	liveCount := 0
	for t, n := range byType {
		types = append(types, fmt.Sprintf("%s x%d", t, n))
		liveCount += n
	}
	sort.Strings(types)
	fmt.Fprintf(w, "%d live instance(s)", liveCount)
	if len(types) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(types, ", "))
	}
	fmt.Fprintf(w, ", $%.4f/hour\n", total)

	pending := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{column("Pending", false), column("Instance", false), column("Detail", false)}}
	for _, t := range st.Terminations {
		if t.State != "done" {
			pending.Rows = append(pending.Rows, row("termination "+t.ID, t.InstanceID, t.Reason))
		}
	}
	for _, r := range st.UnhandledInterruptions {
		pending.Rows = append(pending.Rows, row("interruption "+r.ID, r.InstanceID, fmt.Sprintf("%s, notice %s", r.Kind, r.NoticeTime.UTC().Format(time.RFC3339))))
	}
	if len(pending.Rows) > 0 {
		fmt.Fprintln(w)
		return printTable(w, pending, wide)
	}
	return nil
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// renderCluster prints what new nodes are told about the cluster, and
// the discovery's error.
func renderCluster(w io.Writer, c *api.ClusterFacts) {
	fmt.Fprintf(w, "Cluster %s: Kubernetes %s, endpoint %s, service CIDR %s (cluster DNS %s, %s)", c.Name, dash(c.KubernetesVersion),
		dash(c.Endpoint), dash(c.ServiceCIDR), dash(c.ClusterDNS), dash(c.IPFamily))
	if c.DiscoveredAt != nil {
		fmt.Fprintf(w, ", discovered %s", c.DiscoveredAt.UTC().Format(time.RFC3339))
	}
	if len(c.Overridden) > 0 {
		fmt.Fprintf(w, ", given: %s", strings.Join(c.Overridden, ", "))
	}
	fmt.Fprintln(w)
	if c.Error != "" {
		fmt.Fprintf(w, "Cluster discovery: %s\n", c.Error)
	}
	fmt.Fprintln(w)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
