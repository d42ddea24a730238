package v1

import "testing"

func TestEC2NodeClassHash(t *testing.T) {
	a := &EC2NodeClass{Spec: EC2NodeClassSpec{Role: "r", Tags: map[string]string{"a": "1", "b": "2"}}}
	b := a.DeepCopy()
	if a.Hash() != b.Hash() {
		t.Fatal("equal specs hash differently")
	}
	b.Spec.Role = "other"
	if a.Hash() == b.Hash() {
		t.Fatal("a role change does not change the hash")
	}
	c := a.DeepCopy()
	c.Status.InstanceProfile = "p"
	if a.Hash() != c.Hash() {
		t.Fatal("status changes the hash")
	}
}
