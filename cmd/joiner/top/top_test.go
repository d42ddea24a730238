package top

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/test/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fixedPricer prices from a table: on-demand as listed, spot at 40 %.
type fixedPricer map[string]float64

func (f fixedPricer) Price(instanceType, capacityType, region, zone string) Price {
	od, ok := f[instanceType]
	if !ok {
		return Price{Source: SourceUnknown, Note: instanceType + " has no price in the test table"}
	}
	if capacityType == karpv1.CapacityTypeSpot {
		return Price{PerHour: od * 0.4, Known: true, Source: SourceSpotModel, Currency: "USD", Note: "test prices"}
	}
	return Price{PerHour: od, Known: true, Source: SourceOnDemand, Currency: "USD", Note: "test prices"}
}

var testPrices = fixedPricer{"m5.large": 0.096, "m5.xlarge": 0.192, "c6g.2xlarge": 0.272, "r6i.4xlarge": 1.008}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(-d)) }

func node(name, pool, typ, capacity, zone, cpu, memory string, created time.Duration) *corev1.Node {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("58")}
	labels := map[string]string{karpv1.LabelZone: zone}
	if pool != "" {
		labels[karpv1.LabelNodePool] = pool
	}
	if typ != "" {
		labels[karpv1.LabelInstanceType] = typ
	}
	if capacity != "" {
		labels[karpv1.LabelCapacityType] = capacity
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: ago(created)},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + zone + "/i-" + name},
		Status: corev1.NodeStatus{Allocatable: l, Capacity: l,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func pod(ns, name, nodeName, cpu, memory string, created time.Duration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), CreationTimestamp: ago(created)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func claim(name, pool, typ, capacity, zone, nodeName, providerID string, created time.Duration) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created), Labels: map[string]string{
			karpv1.LabelNodePool: pool, karpv1.LabelInstanceType: typ, karpv1.LabelCapacityType: capacity, karpv1.LabelZone: zone}},
		Status: karpv1.NodeClaimStatus{NodeName: nodeName, ProviderID: providerID},
	}
}

// fixture is a small cluster with every case the view distinguishes.
func fixture() Cluster {
	var c Cluster
	c.Name = "test-context"
	gp := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	gp.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1000")}
	c.NodePools = []*karpv1.NodePool{gp, {ObjectMeta: metav1.ObjectMeta{Name: "arm"}}, {ObjectMeta: metav1.ObjectMeta{Name: "idle"}}}

	n1 := node("ip-10-0-1-1", "general", "m5.xlarge", "on-demand", "us-east-1a", "3920m", "14Gi", 3*time.Hour)
	n2 := node("ip-10-0-1-2", "general", "m5.large", "spot", "us-east-1b", "1930m", "7Gi", 2*time.Hour)
	n2.Spec.Taints = []corev1.Taint{{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}}
	n3 := node("ip-10-0-2-1", "arm", "c6g.2xlarge", "spot", "us-east-1c", "7910m", "14Gi", 90*time.Minute)
	n4 := node("ip-10-0-2-2", "arm", "c6g.2xlarge", "on-demand", "us-east-1a", "7910m", "14Gi", 80*time.Minute)
	n4.Status.Conditions[0].Status = corev1.ConditionFalse
	n5 := node("static-1", "", "x9.mystery", "", "us-east-1a", "4", "16Gi", 48*time.Hour)
	n6 := node("ip-10-0-1-3", "general", "r6i.4xlarge", "on-demand", "us-east-1a", "15890m", "118Gi", 5*time.Hour)
	del := ago(30 * time.Second)
	n6.DeletionTimestamp = &del
	n6.Finalizers = []string{karpv1.TerminationFinalizer}
	n7 := node("ip-10-0-3-1", "gone", "m5.large", "on-demand", "us-east-1b", "1930m", "7Gi", time.Hour)
	n7.Spec.Unschedulable = true
	c.Nodes = []*corev1.Node{n1, n2, n3, n4, n5, n6, n7}

	c1 := claim("general-abcde", "general", "m5.xlarge", "on-demand", "us-east-1a", "ip-10-0-1-1", n1.Spec.ProviderID, 3*time.Hour)
	c2 := claim("general-fghij", "general", "m5.large", "spot", "us-east-1b", "", n2.Spec.ProviderID, 2*time.Hour)
	c2.Annotations = map[string]string{karpv1.AnnotationDisruptionReason: "Underutilized"}
	c2.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionDisruptionReason, Status: metav1.ConditionTrue, Reason: "Underutilized",
		Message: "consolidation: replace with 0 nodes", LastTransitionTime: ago(45 * time.Second)}}
	c3 := claim("arm-klmno", "arm", "c6g.2xlarge", "spot", "us-east-1c", "ip-10-0-2-1", n3.Spec.ProviderID, 90*time.Minute)
	c4 := claim("arm-pqrst", "arm", "c6g.2xlarge", "spot", "us-east-1b", "", "", 20*time.Second)
	c5 := claim("general-uvwxy", "general", "m5.large", "on-demand", "us-east-1a", "", "aws:///us-east-1a/i-launched", 50*time.Second)
	c.NodeClaims = []*karpv1.NodeClaim{c1, c2, c3, c4, c5}

	c.Pods = []*corev1.Pod{
		pod("default", "web-1", "ip-10-0-1-1", "1", "2Gi", time.Hour),
		pod("default", "web-2", "ip-10-0-1-1", "500m", "1Gi", time.Hour),
		pod("default", "api-1", "ip-10-0-1-2", "250m", "512Mi", time.Hour),
		pod("batch", "job-1", "ip-10-0-2-1", "4", "4Gi", 30*time.Minute),
		pod("kube-system", "coredns-1", "static-1", "100m", "70Mi", 48*time.Hour),
	}
	done := pod("batch", "job-0", "ip-10-0-2-1", "4", "4Gi", 2*time.Hour)
	done.Status.Phase = corev1.PodSucceeded
	sidecar := corev1.ContainerRestartPolicyAlways
	withInit := pod("default", "init-1", "ip-10-0-2-1", "1", "1Gi", time.Minute)
	withInit.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
		{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}},
	}
	unsched := pod("default", "big-1", "", "32", "64Gi", 2*time.Minute)
	unsched.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/7 nodes are available: 7 Insufficient cpu.\npreemption: 0/7 nodes are available.", LastTransitionTime: ago(2 * time.Minute)}}}
	nominated := pod("default", "web-3", "", "1", "1Gi", time.Minute)
	nominated.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/7 nodes are available", LastTransitionTime: ago(time.Minute)}}}
	fresh := pod("default", "web-4", "", "1", "1Gi", time.Second)
	fresh.Status.Phase = corev1.PodPending
	c.Pods = append(c.Pods, done, withInit, unsched, nominated, fresh)

	c.Events = []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: nominated.UID},
			Reason: "Nominated", Message: "Pod should schedule on: nodeclaim/general-uvwxy", Source: corev1.EventSource{Component: "joiner"}, LastTimestamp: ago(50 * time.Second)},
		{ObjectMeta: metav1.ObjectMeta{Name: "e0", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: nominated.UID},
			Reason: "FailedScheduling", Message: "older", Source: corev1.EventSource{Component: "default-scheduler"}, LastTimestamp: ago(55 * time.Second)},
		// Older than the condition: the condition wins.
		{ObjectMeta: metav1.ObjectMeta{Name: "e2", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: unsched.UID},
			Reason: "FailedScheduling", Message: "stale", LastTimestamp: ago(10 * time.Minute)},
	}
	c.Warnings = []string{"watch events: forbidden"}
	return c
}

func TestBuildGolden(t *testing.T) {
	s := Build(fixture(), testPrices, t0)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "snapshot.json.golden"), append(b, '\n'), *update)
}

func TestBuildTotals(t *testing.T) {
	s := Build(fixture(), testPrices, t0)
	tot := s.Totals
	// 7 nodes; 2 claims without a node (one launched, priced).
	if tot.Nodes != 7 || tot.Launching != 2 {
		t.Errorf("nodes %d launching %d, want 7 and 2", tot.Nodes, tot.Launching)
	}
	// Running pods on nodes: web-1, web-2, api-1, job-1, coredns-1, init-1 (job-0 finished).
	if tot.Pods != 6 {
		t.Errorf("pods %d, want 6", tot.Pods)
	}
	// init-1 counts max(1 + 0.1 sidecar, 0.1 + 3 init) = 3.1 cores.
	if want := int64(1000 + 500 + 250 + 4000 + 100 + 3100); tot.CPU.Requested != want {
		t.Errorf("cpu requested %d, want %d", tot.CPU.Requested, want)
	}
	// Known prices: m5.xlarge .192, m5.large spot .0384, c6g spot .1088 + od .272, r6i 1.008, m5.large .096 (n7),
	// launched claim m5.large .096; static-1's x9.mystery is unknown.
	want := round4(0.192 + 0.096*0.4 + 0.272*0.4 + 0.272 + 1.008 + 0.096 + 0.096)
	if tot.Cost.PerHour != want || tot.Cost.Unpriced != 1 {
		t.Errorf("cost %v/h (%d unpriced), want %v (1)", tot.Cost.PerHour, tot.Cost.Unpriced, want)
	}
	if tot.Cost.PerMonth != round2(want*HoursPerMonth) {
		t.Errorf("per month %v, want %v", tot.Cost.PerMonth, round2(want*HoursPerMonth))
	}
	var names []string
	for _, p := range s.NodePools {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "arm general idle gone (none)" {
		t.Errorf("pools %q", got)
	}
	if tot.Pending != 3 || s.Pending[0].Name != "big-1" || s.Pending[1].Reason != "Nominated" || s.Pending[0].Message == "stale" {
		t.Errorf("pending %+v", s.Pending)
	}
	// general-fghij (condition), ip-10-0-1-3 (deleting); ordered by start.
	if tot.Disrupting != 2 || s.Disruptions[0].NodeClaim != "general-fghij" || s.Disruptions[0].Reason != "Underutilized" ||
		s.Disruptions[1].Node != "ip-10-0-1-3" || !s.Disruptions[1].Deleting {
		t.Errorf("disruptions %+v", s.Disruptions)
	}
}

func TestBuildEmpty(t *testing.T) {
	s := Build(Cluster{}, testPrices, t0)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	// Scripts get empty lists, not nulls.
	for _, k := range []string{`"nodePools":[]`, `"pendingPods":[]`, `"disruptions":[]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
	sc := Render(s, Options{Width: 80})
	if !strings.Contains(strings.Join(sc.Body, "\n"), "NODEPOOLS (0)") {
		t.Errorf("body %q", sc.Body)
	}
}

func TestRenderGolden(t *testing.T) {
	s := Build(fixture(), testPrices, t0)
	for _, tc := range []struct {
		name          string
		width, height int
		offset        int
	}{
		{"screen-200x60", 200, 60, 0},
		{"screen-100x30", 100, 30, 0},
		{"screen-100x30-scrolled", 100, 30, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := Render(s, Options{Width: tc.width, MaxPending: 20})
			frame := Frame(sc, tc.width, tc.height, tc.offset, "footer")
			for i, l := range strings.Split(frame, "\n") {
				if w := len([]rune(l)); w > tc.width {
					t.Errorf("line %d is %d wide: %q", i, w, l)
				}
			}
			if n := strings.Count(frame, "\n") + 1; n != tc.height {
				t.Errorf("%d lines, want %d", n, tc.height)
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), []byte(frame+"\n"), *update)
		})
	}
}

func TestRenderCapsPending(t *testing.T) {
	c := fixture()
	for i := range 30 {
		p := pod("load", fmt.Sprintf("p-%02d", i), "", "1", "1Gi", time.Duration(i)*time.Second)
		p.Status.Phase = corev1.PodPending
		c.Pods = append(c.Pods, p)
	}
	sc := Render(Build(c, testPrices, t0), Options{Width: 120, MaxPending: 20})
	body := strings.Join(sc.Body, "\n")
	if !strings.Contains(body, "PENDING PODS (33)") || !strings.Contains(body, "... and 13 more") {
		t.Errorf("body:\n%s", body)
	}
}

func TestCataloguePricer(t *testing.T) {
	table, _ := catalog.PricesFor("us-east-1")
	od, ok := table.Price("m5.large")
	if !ok {
		t.Fatal("m5.large has no us-east-1 price")
	}
	p := CataloguePricer{}
	if got := p.Price("m5.large", "on-demand", "us-east-1", "us-east-1a"); !got.Known || got.PerHour != od || got.Source != SourceOnDemand || got.Currency != "USD" {
		t.Errorf("on-demand %+v, want %v", got, od)
	}
	e, _ := catalog.Lookup("m5.large")
	if got := p.Price("m5.large", "spot", "us-east-1", "us-east-1c"); got.Source != SourceSpotModel || got.PerHour != catalog.DefaultSpotModel.Price(e, "us-east-1c") || got.PerHour >= od {
		t.Errorf("spot %+v", got)
	}
	if got := p.Price("m5.large", "reserved", "", ""); got.PerHour != od {
		t.Errorf("reserved %+v, want the on-demand price", got)
	}
	if got := p.Price("m5.large", "on-demand", "xx-nowhere-1", "xx-nowhere-1a"); !got.Known || !strings.Contains(got.Note, "priced as us-east-1") {
		t.Errorf("unknown region %+v", got)
	}
	for _, typ := range []string{"", "x9.mystery"} {
		if got := p.Price(typ, "on-demand", "us-east-1", ""); got.Known || got.Source != SourceUnknown || got.Note == "" {
			t.Errorf("%q: %+v", typ, got)
		}
	}
}

func TestLabelFallbacks(t *testing.T) {
	for _, tc := range []struct {
		labels       map[string]string
		region, capT string
	}{
		{map[string]string{karpv1.LabelZone: "eu-west-1b"}, "eu-west-1", ""},
		{map[string]string{karpv1.LabelZone: "use1-az1", labelEKSCapacityType: "SPOT"}, "", "spot"},
		{map[string]string{karpv1.LabelRegion: "us-west-2", karpv1.LabelZone: "us-east-1a", labelEKSCapacityType: "ON_DEMAND"}, "us-west-2", "on-demand"},
	} {
		if r, c := regionOf(tc.labels), capacityTypeOf(tc.labels); r != tc.region || c != tc.capT {
			t.Errorf("%v: region %q capacity %q, want %q %q", tc.labels, r, c, tc.region, tc.capT)
		}
	}
}

func TestNaturalCompare(t *testing.T) {
	names := []string{"ip-10-0-0-10", "b", "ip-10-0-0-2", "ip-10-0-1-0", "a10", "a9", "a09x", "ip-10-0-0-2a", ""}
	slices.SortFunc(names, naturalCompare)
	if got := strings.Join(names, " "); got != " a9 a09x a10 b ip-10-0-0-2 ip-10-0-0-2a ip-10-0-0-10 ip-10-0-1-0" {
		t.Errorf("sorted %q", got)
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{cpu(350), "0.35"}, {cpu(7910), "7.91"}, {cpu(8000), "8"}, {cpu(12500), "12.5"}, {cpu(1590000), "1590"},
		{mem(512 << 20), "512Mi"}, {mem(7 << 30), "7Gi"}, {mem(1536 << 20), "1.5Gi"}, {mem(6 << 40), "6Ti"}, {mem(100), "100"},
		{money(1234567.891, "USD", 2), "$1,234,567.89"}, {money(0.0384, "USD", 4), "$0.0384"}, {money(12, "CNY", 2), "CNY 12.00"},
		{bar(50, 10), "█████░░░░░"}, {bar(150, 4), "████"}, {bar(0, 3), "░░░"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestModel(t *testing.T) {
	s := Build(fixture(), testPrices, t0)
	calls := 0
	src := func(context.Context) (Snapshot, error) {
		calls++
		if calls == 2 {
			return Snapshot{}, errors.New("apiserver gone")
		}
		return s, nil
	}
	m := NewModel(context.Background(), src, time.Second, PlainTheme())
	if v := m.View(); v != "" {
		t.Errorf("view before the size is known: %q", v)
	}
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 20})
	if v := m.View(); !strings.Contains(v, "waiting for the cluster") {
		t.Errorf("view before the first snapshot:\n%s", v)
	}
	msg := m.Init()()
	_, cmd := m.Update(msg)
	if cmd == nil {
		t.Fatal("no refresh tick after a snapshot")
	}
	v := m.View()
	if !strings.Contains(v, "Nodes 7 (+2 launching)") || strings.Count(v, "\n") != 19 {
		t.Errorf("view:\n%s", v)
	}
	key := func(k string) tea.Cmd {
		var msg tea.KeyMsg
		switch k {
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "end":
			msg = tea.KeyMsg{Type: tea.KeyEnd}
		case "home":
			msg = tea.KeyMsg{Type: tea.KeyHome}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		_, cmd := m.Update(msg)
		return cmd
	}
	key("down")
	if m.offset != 1 {
		t.Errorf("offset %d after down", m.offset)
	}
	key("end")
	if want := ClampOffset(m.screen, 20, 1<<30); m.offset != want || want == 0 {
		t.Errorf("offset %d after end, want %d", m.offset, want)
	}
	if !strings.Contains(m.View(), "PRICES") {
		t.Errorf("end of the body not shown:\n%s", m.View())
	}
	key("home")
	if m.offset != 0 {
		t.Errorf("offset %d after home", m.offset)
	}
	// Only the newest scheduled tick fetches: a manual refresh (r) and the
	// tick its snapshot schedules do not leave two refresh chains running.
	_, _ = m.Update(snapshotMsg{snap: *m.snap})
	stale := tickMsg{n: m.ticks}
	if cmd := key("r"); cmd == nil {
		t.Fatal("r does not refresh")
	}
	_, _ = m.Update(snapshotMsg{snap: *m.snap})
	if _, cmd := m.Update(stale); cmd != nil {
		t.Error("a superseded tick started another refresh")
	}
	if _, cmd := m.Update(tickMsg{n: m.ticks}); cmd == nil {
		t.Error("the newest tick did not refresh")
	}
	// A failed refresh keeps the last picture and says so.
	_, _ = m.Update(snapshotMsg{err: errors.New("apiserver gone")})
	if v := m.View(); !strings.Contains(v, "Nodes 7") || !strings.Contains(v, "refresh failed: apiserver gone") {
		t.Errorf("view after a failed refresh:\n%s", v)
	}
	if cmd := key("q"); cmd == nil {
		t.Fatal("q does not quit")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("q does not quit")
	}
}
