package userdata

import (
	"errors"
	"strings"
	"testing"
)

// TestParseStockForms reads the user data forms a platform engineer writes
// for stock EKS images (a Custom family's user data, launch templates),
// besides what Render writes.
func TestParseStockForms(t *testing.T) {
	type facts struct {
		labels  map[string]string
		taints  string // sorted, space separated
		maxPods int32
		dns     string
		agent   bool
	}
	const al2MIME = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==B==\"\n\n" +
		"--==B==\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=old=1'\n" +
		"--==B==\nContent-Type: text/x-shellscript\n\n#!/bin/bash\njoiner bootstrap\n" +
		"--==B==\nContent-Type: text/plain\n\n#!/bin/bash\n/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=new=2 --max-pods=8'\n--==B==--\n"
	const al2023Two = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n" +
		"--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n" +
		"    config:\n      maxPods: 17\n      clusterDNS: [10.0.0.10]\n    flags: [\"--node-labels=a=1,b=1\"]\n" +
		"--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n" +
		"    config:\n      maxPods: 20\n    flags: [\"--node-labels=b=2\"]\n--B--\n"
	nodeConfig := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n  kubelet:\n    config:\n" +
		"      maxPods: 29\n      clusterDNS:\n        - 172.20.0.10\n      registerWithTaints:\n        - {key: cfg, effect: NoSchedule}\n" +
		"    flags:\n      - --node-labels=team=web,tier=1\n      - --register-with-taints=dedicated=web:NoSchedule\n      - --max-pods 58\n"
	powershell := "<powershell>\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
		"& $EKSBootstrapScriptFile -EKSClusterName \"c\" -APIServerEndpoint \"https://x\" " +
		"-KubeletExtraArgs \"--node-labels=`\"os=win,b=\"\"1\"\"`\" --register-with-taints=os=windows:NoSchedule\" -DNSClusterIP 172.20.0.10\n</powershell>\n"
	bottlerocket := "[settings.kubernetes]\ncluster-name = 'c'\nmax-pods = 30\ncluster-dns-ip = ['172.20.0.10', '172.20.0.11']\n" +
		"[settings.kubernetes.node-labels]\nteam = 'web'\n[settings.kubernetes.node-taints]\ndedicated = 'web:NoSchedule'\nboth = ['a:NoSchedule', 'b:NoExecute']\n"
	al2Script := "#!/bin/bash\nset -ex\n# /etc/eks/bootstrap.sh commented --kubelet-extra-args '--node-labels=no=1'\n" +
		"B64_CLUSTER_CA=abc\n/etc/eks/bootstrap.sh my-cluster \\\n  --b64-cluster-ca $B64_CLUSTER_CA \\\n  --dns-cluster-ip 172.20.0.10 \\\n" +
		"  --kubelet-extra-args \"--node-labels=team=web,tier=\\\"1\\\" --register-with-taints=dedicated=web:NoSchedule,gpu:NoExecute --max-pods=58\" && echo done\n"
	cases := []struct {
		name, family, data string
		want               facts
		wantErr            error // errors.Is; nil: success
	}{
		{name: "AL2 script, double-quoted extra args", family: FamilyAL2, data: al2Script, want: facts{
			labels: map[string]string{"team": "web", "tier": "1"}, taints: "dedicated=web:NoSchedule gpu:NoExecute", maxPods: 58, dns: "172.20.0.10"}},
		{name: "AL2 flags with spaces, no quotes", family: FamilyUbuntu,
			data: "/etc/eks/bootstrap.sh c --dns-cluster-ip=10.1.0.10 --kubelet-extra-args '--node-labels a=b --max-pods 11 --cluster-dns 10.2.0.10'\n",
			want: facts{labels: map[string]string{"a": "b"}, maxPods: 11, dns: "10.2.0.10"}},
		{name: "AL2 call without kubelet args", family: FamilyAL2, data: "#!/bin/bash\n/etc/eks/bootstrap.sh c\n",
			want: facts{labels: map[string]string{}}},
		{name: "AL2 MIME: the last call counts, hook seen", family: FamilyAL2, data: al2MIME,
			want: facts{labels: map[string]string{"new": "2"}, maxPods: 8, agent: true}},
		{name: "AL2 without bootstrap.sh", family: FamilyAL2, data: "#!/bin/bash\necho hi\n", wantErr: ErrNoFacts},
		{name: "AL2023 plain NodeConfig, flags over config", family: FamilyAL2023, data: nodeConfig, want: facts{
			labels: map[string]string{"team": "web", "tier": "1"}, taints: "dedicated=web:NoSchedule", maxPods: 58, dns: "172.20.0.10"}},
		{name: "AL2023 two NodeConfigs merge", family: FamilyAL2023, data: al2023Two, want: facts{
			labels: map[string]string{"a": "1", "b": "2"}, maxPods: 20, dns: "10.0.0.10"}},
		{name: "AL2023 shell only", family: FamilyAL2023, data: "#!/bin/bash\necho hi\n", wantErr: ErrNoFacts},
		{name: "Bottlerocket string taints, DNS list", family: FamilyBottlerocket, data: bottlerocket, want: facts{
			labels: map[string]string{"team": "web"}, taints: "both=a:NoSchedule both=b:NoExecute dedicated=web:NoSchedule", maxPods: 30, dns: "172.20.0.10"}},
		{name: "Windows double-quoted", family: FamilyWindows2019, data: powershell, want: facts{
			labels: map[string]string{"os": "win", "b": "1"}, taints: "os=windows:NoSchedule", dns: "172.20.0.10"}},
		{name: "Windows without the bootstrap call", family: FamilyWindows2022, data: "<powershell>\nWrite-Host hi\n</powershell>", wantErr: ErrNoFacts},
		{name: "Custom: bootstrap.sh script", family: FamilyCustom, data: al2Script, want: facts{
			labels: map[string]string{"team": "web", "tier": "1"}, taints: "dedicated=web:NoSchedule gpu:NoExecute", maxPods: 58, dns: "172.20.0.10"}},
		{name: "Custom: NodeConfig", family: FamilyCustom, data: nodeConfig, want: facts{
			labels: map[string]string{"team": "web", "tier": "1"}, taints: "dedicated=web:NoSchedule", maxPods: 58, dns: "172.20.0.10"}},
		{name: "Custom: NodeConfig MIME", family: FamilyCustom, data: al2023Two, want: facts{
			labels: map[string]string{"a": "1", "b": "2"}, maxPods: 20, dns: "10.0.0.10"}},
		{name: "Custom: Bottlerocket TOML", family: FamilyCustom, data: bottlerocket, want: facts{
			labels: map[string]string{"team": "web"}, taints: "both=a:NoSchedule both=b:NoExecute dedicated=web:NoSchedule", maxPods: 30, dns: "172.20.0.10"}},
		{name: "Custom: PowerShell", family: FamilyCustom, data: powershell, want: facts{
			labels: map[string]string{"os": "win", "b": "1"}, taints: "os=windows:NoSchedule", dns: "172.20.0.10"}},
		{name: "Custom: anything else", family: FamilyCustom, data: "#!/bin/bash\necho hi\n", wantErr: ErrNoFacts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.family, []byte(c.data))
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := facts{labels: f.Labels, taints: strings.Join(taintStrings(f.Taints), " "), maxPods: f.MaxPods, dns: f.ClusterDNS, agent: f.Agent}
			if !equalMaps(got.labels, c.want.labels) || got.taints != c.want.taints || got.maxPods != c.want.maxPods ||
				got.dns != c.want.dns || got.agent != c.want.agent {
				t.Errorf("facts = %+v\nwant    %+v", got, c.want)
			}
		})
	}
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct{ family, data, want string }{
		{FamilyAL2, "/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=lots'", "--max-pods=lots"},
		{FamilyAL2, "/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=novalue'", "--node-labels"},
		{FamilyAL2023, "kind: NodeConfig\nspec:\n  kubelet:\n    flags: [--register-with-taints=bad]\n", "--register-with-taints"},
		{FamilyBottlerocket, "[settings.kubernetes.node-taints]\nk = 'noeffect'\n", "node-taints.k"},
	} {
		if _, err := Parse(c.family, []byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: err = %v, want it to name %q", c.family, c.data, err, c.want)
		}
	}
}

func TestShellCommands(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // commands joined by " ; ", words by "|"
	}{
		{`a 'b c' "d \"e\" \$f" g\ h`, `a|b c|d "e" $f|g h`},
		{"a \\\n  b # comment 'x\nc;d && e | f &", "a|b ; c ; d ; e ; f"},
		{`x"y"'z' # not a #word`, "xyz"},
		{`a#b`, "a#b"},
		{`unterminated 'quote`, "unterminated|quote"},
		{`"a\nb"`, `a\nb`},
		{"", ""},
	} {
		var cmds []string
		for _, cmd := range shellCommands(c.in) {
			cmds = append(cmds, strings.Join(cmd, "|"))
		}
		if got := strings.Join(cmds, " ; "); got != c.want {
			t.Errorf("shellCommands(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
