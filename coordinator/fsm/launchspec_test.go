package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// The NodeClass inputs frozen in a spec survive a snapshot round trip
// unchanged, and snapshots of equal state are byte-equal.
func TestFrozenLaunchParamsRoundTrip(t *testing.T) {
	size := resource.MustParse("20Gi")
	gp3, tokens, hops := "gp3", "required", int64(2)
	s := spec()
	s.Subnets = map[string]string{"us-east-1b": "subnet-b", "us-east-1a": "subnet-a"}
	s.SecurityGroupIDs = []string{"sg-2", "sg-1"}
	s.UserData = []byte("#!/bin/bash\necho hi\n")
	s.BlockDevices = []*awsv1.BlockDeviceMapping{{DeviceName: new("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &size, VolumeType: &gp3}}}
	s.MetadataOptions = &awsv1.MetadataOptions{HTTPTokens: &tokens, HTTPPutResponseHopLimit: &hops}
	s.InstanceProfile, s.DetailedMonitoring = "profile", true
	s.Tags = map[string]string{"team": "platform", "env": "prod"}
	snap := func() (*FSM, []byte) {
		f := New()
		if res := f.ApplyCommand(MustEncode(PlanCommitType, PlanCommit{At: t0, Intents: []NewIntent{{ID: "i1", Spec: s, Pods: []string{"p"}}}}), 1); res != nil {
			t.Fatal(res)
		}
		var buf bytes.Buffer
		if _, err := f.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return f, buf.Bytes()
	}
	_, a := snap()
	_, b := snap()
	if !bytes.Equal(a, b) {
		t.Fatal("snapshots of equal state differ")
	}
	g := New()
	if err := g.Restore(readCloser{bytes.NewReader(a)}); err != nil {
		t.Fatal(err)
	}
	in, _ := g.Intent("i1")
	if !reflect.DeepEqual(in.Spec, s) {
		t.Errorf("restored spec %+v\nwant %+v", in.Spec, s)
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
