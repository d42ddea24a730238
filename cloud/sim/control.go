package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// CapacityError is the body of POST /control/capacity-errors.
type CapacityError struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// Code is the fleet error code, e.g. InsufficientInstanceCapacity; ""
	// clears the injected error.
	Code string `json:"code"`
}

// InstanceInfo is one instance in GET /control/instances.
type InstanceInfo struct {
	ID           string            `json:"id"`
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone"`
	Lifecycle    string            `json:"lifecycle,omitempty"`
	State        string            `json:"state"`
	NodeName     string            `json:"nodeName"`
	Tags         map[string]string `json:"tags"`
	IMDS         string            `json:"imds"`
}

func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	p := strings.TrimPrefix(r.URL.Path, "/control/")
	switch {
	case p == "capacity-errors" && r.Method == http.MethodPost:
		var ce CapacityError
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&ce); err != nil {
			http.Error(w, `{"error":"bad JSON body"}`, http.StatusBadRequest)
			return
		}
		if ce.InstanceType == "" || ce.Zone == "" || (ce.CapacityType != "spot" && ce.CapacityType != "on-demand") {
			http.Error(w, `{"error":"instanceType, zone and capacityType (spot|on-demand) are required"}`, http.StatusBadRequest)
			return
		}
		s.InjectCapacityError(ce.InstanceType, ce.Zone, ce.CapacityType, ce.Code)
		_ = json.NewEncoder(w).Encode(ce)
	case p == "images/release" && r.Method == http.MethodPost:
		var req struct {
			Family string `json:"family"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Family == "" {
			http.Error(w, `{"error":"a JSON body with family (AL2023, AL2, Bottlerocket, Windows2019, Windows2022, Windows2025) is required"}`, http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(s.ReleaseImages(req.Family))
	case p == "instances" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(s.Instances())
	case strings.HasPrefix(p, "instances/") && strings.HasSuffix(p, "/interrupt") && r.Method == http.MethodPost:
		id := strings.TrimSuffix(strings.TrimPrefix(p, "instances/"), "/interrupt")
		t, err := s.Interrupt(id)
		if err != nil {
			http.Error(w, `{"error":"instance not found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"instanceId": id, "action": "terminate", "time": t.Format(time.RFC3339)})
	case instanceEventPath.MatchString(p) && r.Method == http.MethodPost:
		m := instanceEventPath.FindStringSubmatch(p)
		s.serveInstanceEvent(w, r, m[1], m[2])
	case strings.HasPrefix(p, "instances/") && strings.HasSuffix(p, "/imds") && r.Method == http.MethodPost:
		id := strings.TrimSuffix(strings.TrimPrefix(p, "instances/"), "/imds")
		s.mu.Lock()
		ctx := s.runCtx
		s.mu.Unlock()
		if ctx == nil {
			http.Error(w, `{"error":"the sim is not running"}`, http.StatusServiceUnavailable)
			return
		}
		endpoint, err := s.ServeIMDS(ctx, id)
		if err != nil {
			http.Error(w, `{"error":"instance not found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"instanceId": id, "endpoint": endpoint})
	default:
		http.Error(w, `{"error":"unknown control path"}`, http.StatusNotFound)
	}
}

// Instances lists every instance the sim launched, in launch order.
func (s *Sim) Instances() []InstanceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]InstanceInfo, 0, len(s.order))
	for _, id := range s.order {
		in := s.instances[id]
		out = append(out, InstanceInfo{ID: in.ID, InstanceType: in.Type, Zone: in.Zone, Lifecycle: in.Lifecycle,
			State: in.State, NodeName: in.NodeName, Tags: maps.Clone(in.Tags), IMDS: "/imds/" + in.ID})
	}
	return out
}

var (
	releaseSuffix = regexp.MustCompile(`v[0-9]+$`)
	releaseName   = regexp.MustCompile(`-r[0-9]+$`)
)

// ReleaseImages publishes a new release of every image of family that a
// recommended/latest SSM parameter points to, as AWS does for the EKS
// optimized AMIs: per image a new AMI with the next release version (and
// name), the parameters that followed the old one moved to it, and the new
// release's pinned parameter added; pinned parameters of earlier releases
// stay. Classes that select by alias resolve to the new images; nodes
// running the old ones drift. It returns old ID -> new ID.
func (s *Sim) ReleaseImages(family string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	moved := map[string]string{}
	released := map[string]Image{} // old ID -> its next release
	for _, param := range slices.Sorted(maps.Keys(s.cfg.Parameters)) {
		id := s.cfg.Parameters[param]
		old, ok := s.image(id)
		if !ok || old.Family != family || isPinned(param) {
			continue
		}
		im, done := released[id]
		if !done {
			im = s.nextRelease(old)
			s.cfg.Images = append(s.cfg.Images, im)
			released[id], moved[id] = im, im.ID
		}
		s.cfg.Parameters[param] = im.ID
		if pinned := pinnedParameter(param, im); pinned != "" {
			s.cfg.Parameters[pinned] = im.ID
		}
	}
	return moved
}

// nextRelease is the image of old's line in the next release: a new ID,
// the next version in its name, built now (after old).
func (s *Sim) nextRelease(old Image) Image {
	im := old
	im.ID = fmt.Sprintf("%sv%d", releaseSuffix.ReplaceAllString(old.ID, ""), s.releases)
	if next := nextVersion(old.Release); next != "" && strings.Contains(old.Name, old.Release) {
		im.Release, im.Name = next, strings.Replace(old.Name, old.Release, next, 1)
	} else {
		im.Release, im.Name = "", fmt.Sprintf("%s-r%d", releaseName.ReplaceAllString(old.Name, ""), s.releases)
	}
	created := s.now().UTC()
	if t, err := time.Parse(time.RFC3339, old.CreationDate); err == nil && !created.After(t) {
		created = t.Add(24 * time.Hour)
	}
	im.CreationDate = created.Format("2006-01-02T15:04:05.000Z")
	im.Tags = maps.Clone(old.Tags)
	return im
}
