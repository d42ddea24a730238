package khash

import (
	"sync"
	"testing"
	"time"
)

// TestConcurrentHashesAgree: hashes computed at the same time on many
// goroutines equal the one computed alone (the coordinator's loops hash
// pools and classes concurrently).
func TestConcurrentHashesAgree(t *testing.T) {
	d := 720 * time.Hour
	tmpl := func(i int) NodeClaimTemplate {
		return NodeClaimTemplate{ObjectMeta: ObjectMeta{Labels: map[string]string{"team": "a", "i": string(rune('a' + i%26))}},
			Spec: NodeClaimTemplateSpec{NodeClassRef: &NodeClassReference{Kind: "EC2NodeClass", Name: "default", Group: "karpenter.k8s.aws"},
				ExpireAfter: NillableDuration{Duration: &d}}}
	}
	want := make([]string, 26)
	for i := range want {
		want[i] = NodePool(tmpl(i))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*500)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if got := NodePool(tmpl(i % 26)); got != want[i%26] {
					errs <- got
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if n := len(errs); n > 0 {
		t.Fatalf("%d of 4000 concurrent hashes differ from the same hash computed alone", n)
	}
}
