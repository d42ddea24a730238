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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
)

func init() { addCommand(newStatusCmd) }

// coordinatorComponent labels the chart's coordinator Services and pods.
const coordinatorComponent = "app.kubernetes.io/component=coordinator"

// statusFlags are the flags of `joiner status`.
type statusFlags struct {
	addr, tlsDir string
	service, pod string
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

By default it goes through the Kubernetes API server's service proxy with the kubeconfig's
credentials, as kubectl would (no port-forward):
  GET /api/v1/namespaces/NS/services/https:SERVICE:http/proxy/v1/status
SERVICE is --service, else the Service labelled ` + coordinatorComponent + ` that
is not headless (the chart's), in -n or the context's namespace, else in any namespace;
--pod asks one replica through the pods proxy instead.
This needs get on services/proxy (or pods/proxy) in that namespace. The API server consumes
the Authorization header, so status sends the kubeconfig's bearer token again in
` + api.ProxiedAuthorizationHeader + `; the coordinator checks it with TokenReview and answers if
its user may list nodeclaims.karpenter.sh (SubjectAccessReview). A kubeconfig that
authenticates with a client certificate has no token to send: add --token (e.g. from
kubectl create token), or use --addr.

With --addr it dials one coordinator directly, presenting the client certificate the
coordinator keeps in --tls-dir (run it in a coordinator pod).`,
		Example: `  # the coordinators of the current context, wherever the chart put them
  joiner status
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
	fl.StringVar(&f.service, "service", "", "coordinator Service to proxy to (empty: the one labelled "+coordinatorComponent+" that is not headless, in the namespace, else in any)")
	fl.StringVar(&f.pod, "pod", "", "ask this coordinator pod through the API server's pods proxy instead of the Service")
	fl.StringVar(&f.scheme, "scheme", "https", "scheme of the coordinators' HTTP API behind the proxy: https, or http for coordinators run with --insecure-dev")
	f.output = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML, outName)
	fl.BoolVar(&f.all, "all", false, "also list cancelled intents and terminated or lost instances")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up on the coordinator after this long")
	_ = cmd.RegisterFlagCompletionFunc("scheme", cobra.FixedCompletions([]string{"https", "http"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("tls-dir", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	_ = cmd.RegisterFlagCompletionFunc("service", f.completeObjects(func(ctx context.Context, cs kubernetes.Interface, ns string) ([]string, error) {
		l, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: coordinatorComponent})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Name)
		}
		return out, nil
	}))
	_ = cmd.RegisterFlagCompletionFunc("pod", f.completeObjects(func(ctx context.Context, cs kubernetes.Interface, ns string) ([]string, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: coordinatorComponent})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Name)
		}
		return out, nil
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
	if ns == "" && (f.pod != "" || f.service != "") {
		ns = metav1.NamespaceDefault
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return api.Status{}, fmt.Errorf("kubernetes client: %w", err)
	}
	var target string
	if f.pod != "" {
		target, err = podProxyPath(ctx, cs, ns, f.pod, f.scheme)
	} else {
		target, err = serviceProxyPath(ctx, cs, ns, f.service, f.scheme)
	}
	if err != nil {
		return api.Status{}, err
	}
	base, client, err := proxyClient(rc)
	if err != nil {
		return api.Status{}, err
	}
	st, err := api.FetchStatus(ctx, client, base+target)
	if errors.Is(err, api.ErrUnauthorized) && !hasBearer(rc) {
		return st, fmt.Errorf("%w\n(the kubeconfig's credentials are not a bearer token, which the API server would pass on: add --token, e.g. $(kubectl create token ...), or use --addr)", err)
	}
	return st, err
}

// proxyClient is an HTTP client for the API server with the kubeconfig's
// credentials that also sends its bearer token in
// api.ProxiedAuthorizationHeader, which the proxy passes on (it drops
// Authorization once it has authenticated the request).
func proxyClient(rc *rest.Config) (string, *http.Client, error) {
	c := rest.CopyConfig(rc)
	// WrapTransport is the innermost layer: the credential layers (token,
	// token file, exec plugin) have set Authorization when it runs.
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return forwardBearer{rt} })
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes client: %w", err)
	}
	u, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return "", nil, fmt.Errorf("kubeconfig server %q: %w", c.Host, err)
	}
	return strings.TrimSuffix(u.String(), "/"), client, nil
}

// forwardBearer copies the request's bearer token into
// api.ProxiedAuthorizationHeader.
type forwardBearer struct{ next http.RoundTripper }

func (f forwardBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		r = r.Clone(r.Context())
		r.Header.Set(api.ProxiedAuthorizationHeader, a)
	}
	return f.next.RoundTrip(r)
}

// hasBearer reports whether the config authenticates with a bearer token.
func hasBearer(rc *rest.Config) bool {
	return rc.BearerToken != "" || rc.BearerTokenFile != "" || rc.ExecProvider != nil || rc.AuthProvider != nil
}

// serviceProxyPath is the API server path that proxies to the coordinator
// Service's HTTP port: name, else the one non-headless Service labelled as
// the coordinators' in ns (in any namespace when ns is "").
func serviceProxyPath(ctx context.Context, cs kubernetes.Interface, ns, name, scheme string) (string, error) {
	var svc *corev1.Service
	if name != "" {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("--service %s in namespace %s: %w", name, ns, err)
		}
		svc = s
	} else {
		where := "namespace " + ns
		if ns == "" {
			where = "any namespace"
		}
		l, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: coordinatorComponent})
		if err != nil {
			return "", fmt.Errorf("finding the coordinator Service in %s (give -n): %w", where, err)
		}
		var found []string
		for i := range l.Items {
			if l.Items[i].Spec.ClusterIP != corev1.ClusterIPNone {
				svc = &l.Items[i]
				found = append(found, l.Items[i].Namespace+"/"+l.Items[i].Name)
			}
		}
		switch len(found) {
		case 0:
			return "", fmt.Errorf("no coordinator Service in %s (a Service labelled %s that is not headless): give -n or --service", where, coordinatorComponent)
		case 1:
		default:
			return "", fmt.Errorf("%d coordinator Services in %s (%s): pick one with -n and --service", len(found), where, strings.Join(found, ", "))
		}
	}
	port, err := servicePort(svc)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/api/v1/namespaces/%s/services/%s/proxy", url.PathEscape(svc.Namespace), url.PathEscape(scheme+":"+svc.Name+":"+port)), nil
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

// podProxyPath is the API server path that proxies to the pod's
// container port named http.
func podProxyPath(ctx context.Context, cs kubernetes.Interface, ns, name, scheme string) (string, error) {
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--pod %s in namespace %s: %w", name, ns, err)
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
		return "", fmt.Errorf("--pod %s/%s: no container port named http", ns, name)
	}
	return fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/proxy", url.PathEscape(ns), url.PathEscape(scheme+":"+name+":"+strconv.Itoa(port))), nil
}

// completeObjects completes a flag with names list returns from the
// cluster the kube flags name (nothing when it is not reachable).
func (f *statusFlags) completeObjects(list func(context.Context, kubernetes.Interface, string) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		cs, err := f.kube.clientset()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns := f.kube.namespaceGiven() // "": every namespace
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		names, err := list(ctx, cs, ns)
		if err != nil {
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
