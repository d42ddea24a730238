package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cmd/joiner/top"
	"github.com/joiner-dev/joiner/coordinator/kube"
)

func init() { addCommand(newTopCmd) }

func newTopCmd(_ *globals) *cobra.Command {
	var (
		output  string
		refresh time.Duration
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of nodes by NodePool: instance types, requests, cost, pending pods, disruption",
		Long: `top shows the cluster's nodes grouped by NodePool, each with its instance type, capacity type, zone,
price per hour, CPU and memory requested against allocatable, and pods; the cluster's cost per hour and
per month; the pods no node runs yet, with the newest word on why (their PodScheduled condition or
events such as FailedScheduling and Nominated); and the nodes being disrupted (tainted
karpenter.sh/disrupted, a NodeClaim with the DisruptionReason condition, or being deleted).

Prices come from the node labels and Joiner's embedded catalogue: on-demand list prices per region,
spot prices modelled from them (marked ~). A node whose price is unknown shows ? and is left out of
the totals. It reads nodes, pods, nodeclaims, nodepools and pod events through watches, across
all namespaces (-n is not used).

Keys: q quit, arrows/j/k, PgUp/PgDn, Home/End scroll, r refresh now.`,
		Example: `  joiner top
  joiner top --context prod --refresh 5s
  joiner top -o json | jq '.totals.cost, (.pendingPods | length)'`,
		Args: cobra.NoArgs,
	}
	kf := addKubeFlags(cmd, "")
	fl := cmd.Flags()
	fl.StringVarP(&output, "output", "o", "", "output format: json prints one snapshot and exits; empty runs the live view")
	fl.DurationVar(&refresh, "refresh", 2*time.Second, "how often the live view takes a new snapshot")
	fl.DurationVar(&timeout, "timeout", time.Minute, "with -o json, how long to wait for the first full read of the cluster")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != "" && output != "json" {
			return fmt.Errorf("--output %q: want json, or nothing for the live view", output)
		}
		if refresh <= 0 {
			return fmt.Errorf("--refresh %s: want a positive duration", refresh)
		}
		if output == "" && !term.IsTerminal(int(os.Stdout.Fd())) {
			return errors.New("the live view needs a terminal: use -o json for scripts")
		}
		cfg, err := kf.restConfig()
		if err != nil {
			return err
		}
		// client-go logs watch failures through klog; they would scribble
		// over the screen. The view reports them as warnings instead.
		klog.SetLogger(logr.Discard())
		ctx, cancel := context.WithCancel(cmd.Context())
		defer cancel()
		src, err := newTopSource(ctx, cfg, topClusterName(kf, cfg))
		if err != nil {
			return err
		}
		if output == "json" {
			jctx, jcancel := context.WithTimeout(ctx, timeout)
			defer jcancel()
			s, err := src.snapshot(jctx)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		}
		theme := top.ColorTheme(lipgloss.NewRenderer(os.Stdout))
		p := tea.NewProgram(top.NewModel(ctx, src.snapshot, refresh, theme), tea.WithAltScreen(), tea.WithContext(ctx))
		if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrInterrupted) {
			return fmt.Errorf("live view: %w", err)
		}
		return nil
	}
	return cmd
}

// topClusterName names the cluster in the header: the kubeconfig context,
// else the API server's host.
func topClusterName(kf *kubeFlags, cfg *rest.Config) string {
	if kf.overrides.CurrentContext != "" {
		return kf.overrides.CurrentContext
	}
	if raw, err := kf.loader().RawConfig(); err == nil && raw.CurrentContext != "" {
		return raw.CurrentContext
	}
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		return u.Host
	}
	return cfg.Host
}

// topSource watches what `joiner top` shows: nodes, pods, NodeClaims and
// NodePools (required), and pod events (best effort: without them pending
// pods show their PodScheduled condition only).
type topSource struct {
	name     string
	required map[string]cache.SharedIndexInformer
	events   cache.SharedIndexInformer
	warnings []string // fixed at start

	mu       sync.Mutex
	watchErr map[string]watchError
}

type watchError struct {
	err error
	at  time.Time
}

// watchErrorTTL: the reflector retries a failing watch at least every 30 s,
// so an error older than this has healed.
const watchErrorTTL = 45 * time.Second

// newTopSource starts the informers; they stop with ctx.
func newTopSource(ctx context.Context, cfg *rest.Config, name string) (*topSource, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 40
	}
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	kc, dc := clients.Kube, clients.Dynamic
	s := &topSource{name: name, required: map[string]cache.SharedIndexInformer{}, watchErr: map[string]watchError{}}
	core := informers.NewSharedInformerFactory(kc, 0)
	s.required["nodes"] = core.Core().V1().Nodes().Informer()
	s.required["pods"] = core.Core().V1().Pods().Informer()
	topMust(s.required["nodes"].SetTransform(slimNode))
	topMust(s.required["pods"].SetTransform(slimPod))
	evf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "involvedObject.kind=Pod"
	}))
	s.events = evf.Core().V1().Events().Informer()
	topMust(s.events.SetTransform(stripFields))
	s.watch("events", s.events)

	dyn := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	served, err := karpenterServed(kc)
	switch {
	case err != nil:
		return nil, err
	case served:
		s.required["nodeclaims"] = dyn.ForResource(karpv1.SchemeGroupVersion.WithResource("nodeclaims")).Informer()
		s.required["nodepools"] = dyn.ForResource(karpv1.SchemeGroupVersion.WithResource("nodepools")).Informer()
		topMust(s.required["nodeclaims"].SetTransform(typedAs[karpv1.NodeClaim]))
		topMust(s.required["nodepools"].SetTransform(typedAs[karpv1.NodePool]))
	default:
		s.warnings = append(s.warnings, "karpenter.sh/v1 is not served (Joiner's CRDs are not installed): no NodeClaims or NodePools")
	}
	for name, inf := range s.required {
		s.watch(name, inf)
	}
	core.Start(ctx.Done())
	evf.Start(ctx.Done())
	dyn.Start(ctx.Done())
	return s, nil
}

func topMust(err error) {
	if err != nil { // only fails once an informer has started
		panic(err)
	}
}

// karpenterServed says whether the API server serves karpenter.sh/v1.
func karpenterServed(kc kubernetes.Interface) (bool, error) {
	_, err := kc.Discovery().ServerResourcesForGroupVersion(karpv1.SchemeGroupVersion.String())
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("discovering %s: %w", karpv1.SchemeGroupVersion, err)
}

func (s *topSource) watch(name string, inf cache.SharedIndexInformer) {
	topMust(inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.watchErr[name] = watchError{err: err, at: time.Now()}
	}))
}

// errors are the recent watch errors, by informer name.
func (s *topSource) errors(now time.Time) map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]error{}
	for name, we := range s.watchErr {
		if now.Sub(we.at) < watchErrorTTL {
			out[name] = we.err
		}
	}
	return out
}

// snapshot waits until the required informers have synced (failing fast
// when one of them cannot list), then builds the view.
func (s *topSource) snapshot(ctx context.Context) (top.Snapshot, error) {
	for {
		var waiting []string
		for name, inf := range s.required {
			if !inf.HasSynced() {
				waiting = append(waiting, name)
			}
		}
		if len(waiting) == 0 {
			break
		}
		sort.Strings(waiting)
		errs := s.errors(time.Now())
		for _, name := range waiting {
			if err := errs[name]; err != nil {
				return top.Snapshot{}, fmt.Errorf("reading %s: %w", name, err)
			}
		}
		select {
		case <-ctx.Done():
			return top.Snapshot{}, fmt.Errorf("waiting for %s to be read: %w", strings.Join(waiting, ", "), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	c := top.Cluster{Name: s.name, Warnings: append([]string{}, s.warnings...)}
	c.Nodes = listAs[corev1.Node](s.required["nodes"])
	c.Pods = listAs[corev1.Pod](s.required["pods"])
	if inf := s.required["nodeclaims"]; inf != nil {
		c.NodeClaims = listAs[karpv1.NodeClaim](inf)
		c.NodePools = listAs[karpv1.NodePool](s.required["nodepools"])
	}
	errs := s.errors(time.Now())
	if s.events.HasSynced() {
		c.Events = listAs[corev1.Event](s.events)
	} else if errs["events"] != nil {
		c.Warnings = append(c.Warnings, fmt.Sprintf("pod events: %v (pending reasons from the PodScheduled condition only)", errs["events"]))
	}
	names := make([]string, 0, len(errs))
	for name := range errs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name != "events" {
			c.Warnings = append(c.Warnings, fmt.Sprintf("watching %s: %v (showing the last state read)", name, errs[name]))
		}
	}
	return top.Build(c, top.CataloguePricer{}, time.Now()), nil
}

// listAs lists an informer's store as *T, skipping anything else.
func listAs[T any](inf cache.SharedIndexInformer) []*T {
	items := inf.GetStore().List()
	out := make([]*T, 0, len(items))
	for _, it := range items {
		if t, ok := it.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// stripFields drops what the view never reads: managed fields and
// annotations (last-applied configurations weigh more than the rest).
func stripFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		o.SetAnnotations(nil)
	}
	return obj, nil
}

// slimNode also drops the image list, the largest part of a Node.
func slimNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return stripFields(obj)
}

// slimPod keeps what requests and pending reasons need.
func slimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.Spec.Volumes = nil
		for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
			for i := range cs {
				cs[i].Env, cs[i].EnvFrom, cs[i].VolumeMounts, cs[i].Command, cs[i].Args = nil, nil, nil, nil, nil
			}
		}
		p.Status.ContainerStatuses, p.Status.InitContainerStatuses = nil, nil
	}
	return stripFields(obj)
}

// typedAs converts the dynamic informer's unstructured objects into T
// (annotations kept: the NodeClaim's disruption reason is one).
func typedAs[T any](obj any) (any, error) {
	conv := func(u *unstructured.Unstructured) (any, error) {
		u.SetManagedFields(nil)
		t := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return t, nil
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return conv(o)
	case cache.DeletedFinalStateUnknown:
		if u, ok := o.Obj.(*unstructured.Unstructured); ok {
			t, err := conv(u)
			if err != nil {
				return nil, err
			}
			o.Obj = t
		}
		return o, nil
	}
	return obj, nil
}
