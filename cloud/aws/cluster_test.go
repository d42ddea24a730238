package aws_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// TestDescribeCluster: EKS DescribeCluster through the SDK, as the sim
// answers it: the default cluster's facts, an IPv6 cluster, an unknown
// name (ResourceNotFoundException, 404: cloud.ErrNotFound) and a value
// EKS would never give.
func TestDescribeCluster(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ipv6 := sim.DefaultCluster()
	ipv6.ServiceIPv4CIDR, ipv6.ServiceIPv6CIDR, ipv6.IPFamily = "", "fd30:1d2e:3f4a::/108", "ipv6"
	bad := sim.DefaultCluster()
	bad.Version = "latest"
	for _, tc := range []struct {
		name    string
		cluster sim.EKSCluster
		ask     string
		want    cloud.Cluster
		wantErr []string // substrings
		is      error
	}{
		{name: "default", cluster: sim.DefaultCluster(), ask: "sim", want: cloud.Cluster{Name: "sim", Endpoint: sim.DefaultCluster().Endpoint,
			CABundle: []byte(sim.DefaultClusterCA), ServiceCIDR: "172.20.0.0/16", KubernetesVersion: sim.DefaultClusterVersion, IPFamily: "ipv4"}},
		{name: "ipv6", cluster: ipv6, ask: "sim", want: cloud.Cluster{Name: "sim", Endpoint: sim.DefaultCluster().Endpoint,
			CABundle: []byte(sim.DefaultClusterCA), ServiceIPv6CIDR: "fd30:1d2e:3f4a::/108", KubernetesVersion: sim.DefaultClusterVersion, IPFamily: "ipv6"}},
		{name: "not found", cluster: sim.DefaultCluster(), ask: "nope", is: cloud.ErrNotFound,
			wantErr: []string{"describing EKS cluster nope", "ResourceNotFoundException", "No cluster found for name: nope."}},
		{name: "bad version", cluster: bad, ask: "sim", wantErr: []string{`kubernetes version "latest"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.sim.SetCluster(tc.cluster)
			got, err := joineraws.DescribeCluster(ctx, e.clients().EKS, tc.ask)
			if tc.wantErr != nil {
				for _, s := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), s) {
						t.Errorf("error %v, want it to say %q", err, s)
					}
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("error %v is not %v", err, tc.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertCluster(t, got, tc.want)
			if dns := got.NodeServiceCIDR(); dns != tc.want.ServiceCIDR+tc.want.ServiceIPv6CIDR {
				t.Errorf("node service CIDR %q", dns)
			}
		})
	}
}

func assertCluster(t *testing.T, got, want cloud.Cluster) {
	t.Helper()
	if string(got.CABundle) != string(want.CABundle) {
		t.Errorf("CA bundle %q, want %q", got.CABundle, want.CABundle)
	}
	got.CABundle, want.CABundle = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cluster\n got %+v\nwant %+v", got, want)
	}
}

// TestClusterDiscovery: a fact the operator sets wins, the others are
// discovered; overrides that leave nothing to discover make no call; a
// failed refresh keeps the facts discovered before; with nothing
// discovered, the error names what is missing and why.
func TestClusterDiscovery(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	otherCA := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	full := cloud.Cluster{Endpoint: "https://k8s.example", CABundle: otherCA, ServiceCIDR: "10.100.0.0/16", KubernetesVersion: "1.33"}
	discovered := cloud.Cluster{Name: "sim", Endpoint: sim.DefaultCluster().Endpoint, CABundle: []byte(sim.DefaultClusterCA),
		ServiceCIDR: "172.20.0.0/16", KubernetesVersion: sim.DefaultClusterVersion, IPFamily: "ipv4"}
	for _, tc := range []struct {
		name      string
		cluster   string
		overrides cloud.Cluster
		want      cloud.Cluster
		calls     int
		wantErr   []string
	}{
		{name: "name only", cluster: "sim", want: discovered, calls: 1},
		{name: "endpoint and version set", cluster: "sim", overrides: cloud.Cluster{Endpoint: "https://k8s.example", KubernetesVersion: "1.33"},
			want: cloud.Cluster{Name: "sim", Endpoint: "https://k8s.example", CABundle: []byte(sim.DefaultClusterCA), ServiceCIDR: "172.20.0.0/16",
				KubernetesVersion: "1.33", IPFamily: "ipv4"}, calls: 1},
		{name: "IPv6 service CIDR set", cluster: "sim", overrides: cloud.Cluster{ServiceIPv6CIDR: "fd00::/108"},
			want: cloud.Cluster{Name: "sim", Endpoint: sim.DefaultCluster().Endpoint, CABundle: []byte(sim.DefaultClusterCA),
				ServiceCIDR: "172.20.0.0/16", ServiceIPv6CIDR: "fd00::/108", KubernetesVersion: sim.DefaultClusterVersion, IPFamily: "ipv6"}, calls: 1},
		{name: "everything set: no call", cluster: "not-in-eks", overrides: full,
			want: cloud.Cluster{Name: "not-in-eks", Endpoint: "https://k8s.example", CABundle: otherCA, ServiceCIDR: "10.100.0.0/16",
				KubernetesVersion: "1.33", IPFamily: "ipv4"}},
		{name: "not found", cluster: "nope", overrides: cloud.Cluster{Endpoint: "https://k8s.example"}, calls: 1,
			wantErr: []string{"cluster nope: certificate authority, service CIDR, Kubernetes version neither given nor discovered",
				"No cluster found for name: nope.", cloud.ErrClusterUnknown.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.sim.Calls("DescribeCluster")
			d, err := joineraws.NewClusterDiscovery(e.clients().EKS, tc.cluster, tc.overrides, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			refreshErr := d.Refresh(ctx)
			got, err := d.Cluster()
			if calls := e.sim.Calls("DescribeCluster") - before; calls != tc.calls {
				t.Errorf("%d DescribeCluster calls, want %d", calls, tc.calls)
			}
			if tc.wantErr != nil {
				if refreshErr == nil || !errors.Is(err, cloud.ErrClusterUnknown) {
					t.Fatalf("refresh error %v, cluster error %v: want both", refreshErr, err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q, want it to say %q", err, s)
					}
				}
				return
			}
			if refreshErr != nil || err != nil {
				t.Fatal(refreshErr, err)
			}
			assertCluster(t, got, tc.want)
		})
	}

	t.Run("failed refresh keeps the facts", func(t *testing.T) {
		d, err := joineraws.NewClusterDiscovery(e.clients().EKS, "sim", cloud.Cluster{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		gone := sim.DefaultCluster()
		gone.Name = "renamed"
		e.sim.SetCluster(gone)
		t.Cleanup(func() { e.sim.SetCluster(sim.DefaultCluster()) })
		if err := d.Refresh(ctx); !errors.Is(err, cloud.ErrNotFound) {
			t.Fatalf("refresh: %v, want not found", err)
		}
		got, err := d.Cluster()
		if err != nil {
			t.Fatal(err)
		}
		assertCluster(t, got, discovered)
		if st := d.Status(); st.Err == nil || st.DiscoveredAt.IsZero() {
			t.Errorf("status %+v: want the refresh error and when it was discovered", st)
		}
	})

	t.Run("bad overrides", func(t *testing.T) {
		for _, o := range []cloud.Cluster{
			{Endpoint: "k8s.example"}, {ServiceCIDR: "fd00::/108"}, {KubernetesVersion: "v1.34"}, {CABundle: []byte("not PEM")},
		} {
			if _, err := joineraws.NewClusterDiscovery(nil, "sim", o, nil, nil); err == nil {
				t.Errorf("overrides %+v accepted", o)
			}
		}
	})
}

// TestProviderFollowsClusterVersion: with a discovery, AMI aliases resolve
// for the cluster's version and follow an upgrade at the next refresh;
// reading the version while a refresh runs is safe (go test -race).
func TestProviderFollowsClusterVersion(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ac := e.clients()
	d, err := joineraws.NewClusterDiscovery(ac.EKS, "sim", cloud.Cluster{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := e.newProvider(t, joineraws.Options{Cluster: "sim", Discovery: d})
	if v := p.KubernetesVersion(); v != "" {
		t.Errorf("version %q before discovery, want none", v)
	}
	upgraded := sim.DefaultCluster()
	upgraded.Version = "1.35"
	for _, step := range []struct {
		cluster sim.EKSCluster
		version string
	}{{sim.DefaultCluster(), sim.DefaultClusterVersion}, {upgraded, "1.35"}} {
		e.sim.SetCluster(step.cluster)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.KubernetesVersion() }()
		if err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if v := p.KubernetesVersion(); v != step.version {
			t.Fatalf("version %q, want %q", v, step.version)
		}
		r, err := p.Resolve(ctx, nodeClass())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.AMIs) == 0 {
			t.Fatal("no AMIs")
		}
		for _, a := range r.AMIs {
			if !strings.Contains(a.Name, "-"+step.version+"-") {
				t.Errorf("Kubernetes %s: AMI %s %s", step.version, a.ID, a.Name)
			}
		}
	}
}
