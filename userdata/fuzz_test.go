package userdata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/userdata/mime"
)

func addSeeds(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "input", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// FuzzMIMEMerge: merging arbitrary user data into AL2 and AL2023 archives
// never panics; a success is a well-formed archive whose last part is
// Joiner's and whose node facts are Joiner's.
func FuzzMIMEMerge(f *testing.F) {
	addSeeds(f, "shell.sh", "mime.txt", "nodeconfig.yaml")
	f.Add("Content-Type: multipart/mixed; boundary=X\r\n\r\n--X\r\nContent-Type: text/plain\r\n\r\nhi")
	f.Add("MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n")
	f.Fuzz(func(t *testing.T, userData string) {
		for _, fam := range []string{FamilyAL2, FamilyAL2023} {
			in := testInput(fam, userData, nil)
			out, err := Render(in)
			if err != nil {
				if !strings.Contains(err.Error(), "userData") {
					t.Fatalf("%s: error does not name spec.userData: %v", fam, err)
				}
				continue
			}
			parts, err := mime.Parse(out)
			if err != nil {
				t.Fatalf("%s: output does not parse: %v\n%q", fam, err, out)
			}
			if len(parts) < 2 {
				t.Fatalf("%s: %d parts", fam, len(parts))
			}
			if !strings.Contains(string(parts[len(parts)-2].Body), "joiner bootstrap") {
				t.Fatalf("%s: Joiner hook is not second to last", fam)
			}
			last := parts[len(parts)-1]
			if fam == FamilyAL2 && !strings.Contains(string(last.Body), "/etc/eks/bootstrap.sh") {
				t.Fatalf("AL2: last part is not Joiner's bootstrap")
			}
			if fam == FamilyAL2023 && !strings.HasPrefix(string(last.Body), nodeConfigComment) {
				t.Fatalf("AL2023: last part is not Joiner's NodeConfig")
			}
			if fam == FamilyAL2 {
				facts, err := Parse(fam, out)
				if err != nil {
					t.Fatalf("AL2: Parse: %v", err)
				}
				if facts.MaxPods != 234 || facts.Labels["testing/cluster"] != "unspecified" {
					t.Fatalf("AL2: facts %+v", facts)
				}
			}
		}
	})
}

// FuzzTOMLMerge: merging arbitrary user TOML never panics; a success is
// valid TOML in which Joiner's keys win.
func FuzzTOMLMerge(f *testing.F) {
	addSeeds(f, "settings.toml", "shell.sh")
	f.Add("[settings.kubernetes.node-labels]\n'karpenter.sh/nodepool' = 'user'\n")
	f.Add("settings.kubernetes = 'x'\n")
	f.Add("[settings]\nbootstrap-containers = 1\n")
	f.Fuzz(func(t *testing.T, userData string) {
		in := testInput(FamilyBottlerocket, userData, fullKubelet())
		out, err := Render(in)
		if err != nil {
			if !strings.Contains(err.Error(), "userData") {
				t.Fatalf("error does not name spec.userData: %v", err)
			}
			return
		}
		facts, err := Parse(FamilyBottlerocket, out)
		if err != nil {
			t.Fatalf("output does not parse back: %v\n%s", err, out)
		}
		if facts.MaxPods != 20 || facts.ClusterDNS != "10.0.1.100" || !facts.Agent {
			t.Fatalf("facts %+v", facts)
		}
		for k, v := range wantLabels {
			if facts.Labels[k] != v {
				t.Fatalf("label %s = %q, want %q", k, facts.Labels[k], v)
			}
		}
		if got := taintStrings(facts.Taints); strings.Join(got, " ") != strings.Join(wantTaints, " ") {
			t.Fatalf("taints = %v", got)
		}
	})
}

// FuzzParse: reading arbitrary user data as any family never panics, and
// a failure is an error, never facts without a label map.
func FuzzParse(f *testing.F) {
	addSeeds(f, "shell.sh", "mime.txt", "nodeconfig.yaml", "settings.toml", "windows.ps1", "eks-custom-nodeconfig.yaml")
	f.Add("/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=\"a=b\" --max-pods 3'")
	f.Add("& $EKSBootstrapScriptFile -KubeletExtraArgs \"--node-labels=`\"a=b`\"\" -DNSClusterIP ''")
	f.Fuzz(func(t *testing.T, data string) {
		for _, fam := range Families {
			facts, err := Parse(fam, []byte(data))
			if err == nil && facts.Labels == nil {
				t.Fatalf("%s: facts without a label map", fam)
			}
		}
	})
}
